"""``benchmarks/records_index.py``: the committed ``benchmarks/records/INDEX.md`` is what the
script writes from the record files (so it cannot go stale), every record parses, and a record
that contradicts its folder is refused with one line naming its file."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "records_index.py"


@pytest.fixture(scope="module")
def records_index():
    spec = importlib.util.spec_from_file_location("records_index", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_index_is_what_the_script_writes(records_index):
    committed = (records_index.RECORDS / records_index.INDEX).read_text()
    assert committed == records_index.index(), "benchmarks/records/INDEX.md is stale: run benchmarks/records_index.py"


def test_every_record_is_in_the_index(records_index):
    root = records_index.RECORDS
    runs = {path.parent.relative_to(root).as_posix() for path in root.rglob("record.json")}
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.suffix in (".json", ".txt")}
    benchmarks = {f for f in files if not any(f.startswith(run + "/") for run in runs)}
    listed = {
        line.split("`")[1] for line in (root / records_index.INDEX).read_text().splitlines() if line.startswith("| [`")
    }
    assert listed == runs | benchmarks
    assert len(runs) > 10 and all(run.count("/") == 2 for run in runs)


def write_run(folder: Path, dataset="codex-s", num_layers=2, results=True, ranked_test=True):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"dataset": dataset, "num_layers": num_layers, "epochs": 4}))
    (folder / "record.json").write_text(
        json.dumps({"commands": ["python x.py  # commit abc1234, 2026-11-23"], "machine": "m"})
    )
    log = [
        {"event": "epoch", "epoch": 1, "wall_seconds": 30.0},
        {"event": "eval", "split": "valid", "epoch": 2, "wall_seconds": 60.0, "both.mrr": 0.25},
        {"event": "eval", "split": "valid", "epoch": 4, "wall_seconds": 125.0, "both.mrr": 0.125},
        {"event": "epoch", "epoch": 4, "wall_seconds": 120.0},
    ]
    (folder / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    if results:
        metrics = {"mrr": 0.3125, "hits@10": 0.5}
        result = {"epochs_trained": 4, "best_epoch": 2, "wall_seconds": 150.0}
        result.update(valid={"metrics": {"both": {"mrr": 0.25}}}, test={"metrics": {"both": metrics}})
        if not ranked_test:  # a tune trial's run folder: validation only
            result["test"] = None
        (folder / "results.json").write_text(json.dumps(result))


def test_rows_hold_the_records_figures(records_index, tmp_path):
    write_run(tmp_path / "codex-s" / "wge" / "fast-4ep")
    write_run(tmp_path / "codex-s" / "quate" / "fast-4ep-stopped", num_layers=0, results=False)
    (tmp_path / "speed" / "codex-s").mkdir(parents=True)
    speed = {"dataset": "codex-s", "git": {"commit": "abc1234"}, "date": "2026-11-24", "command": "a | b"}
    speed["results"] = {"wge": {"epoch_s": 1.5, "test_eval_s": 0.25, "peak_rss_mb": 1234.4}}
    (tmp_path / "speed" / "codex-s" / "abc1234.json").write_text(json.dumps(speed))
    rows = [line for line in records_index.index(tmp_path).splitlines() if line.startswith("| [`")]
    cells = [row[2:-2].split(" | ") for row in rows]
    # finished: results.json's figures (MRR to 4 places, H@10 in %, minutes from 150 s)
    assert cells[1][1:13] == [
        *["codex-s", "wge", "fast-4ep", "4", "2", "0.2500", "0.3125", "50.00", "2.5"],
        *["m", "abc1234", "2026-11-23"],
    ]
    # stopped: its log's last epoch, best validation and last logged time (125 s)
    assert cells[0][4:10] == ["4 (stopped)", "2", "0.2500", "-", "-", "2.1"]
    assert cells[2][1:5] == ["speed", "codex-s", "-", "wge: epoch 1.5 s, test 0.25 s, 1,234 MB"]
    assert cells[2][-1] == "`a \\| b`"


def test_a_tune_trial_without_test_metrics_has_dashes_for_them(records_index, tmp_path):
    write_run(tmp_path / "codex-s" / "wge" / "fast-4ep-tuned", ranked_test=False)
    (row,) = [line for line in records_index.index(tmp_path).splitlines() if line.startswith("| [`")]
    assert row[2:-2].split(" | ")[4:10] == ["4", "2", "0.2500", "-", "-", "2.5"]


def test_a_record_contradicting_its_folder_is_refused_in_one_line(records_index, tmp_path, capsys):
    write_run(tmp_path / "codex-s" / "quate" / "fast-4ep")  # a WGE run (2 layers) in a QuatE folder
    with pytest.raises(SystemExit) as exit_info:
        records_index.main(["--records", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "config.json: a codex-s wge run, but its folder says codex-s quate" in error


def test_a_record_that_does_not_parse_is_named(records_index, tmp_path):
    write_run(tmp_path / "codex-s" / "wge" / "fast-4ep")
    (tmp_path / "codex-s" / "wge" / "fast-4ep" / "results.json").write_text("{")
    with pytest.raises(records_index.RecordError, match="fast-4ep/results.json: not a readable JSON file"):
        records_index.index(tmp_path)


def test_check_reports_a_stale_index(records_index, tmp_path):
    write_run(tmp_path / "codex-s" / "wge" / "fast-4ep")
    assert records_index.main(["--records", str(tmp_path)]) == 0
    assert records_index.main(["--records", str(tmp_path), "--check"]) == 0
    (tmp_path / "INDEX.md").write_text("old\n")
    assert records_index.main(["--records", str(tmp_path), "--check"]) == 1
