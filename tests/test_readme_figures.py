"""The README's figures for its main command: the range of test MRRs it quotes is that of the
records of the main command's recipe (CoDEx-S, fast, 500 epochs), and its results row is their
seeds' mean."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "benchmarks" / "records"


def main_command_runs() -> dict:
    """Test MRR of every recorded run of the main command's recipe: the trainer's runs
    (``codex-s/wge/fast-500ep-*``) and the example's (``example/codex-s-fast-500ep-*``)."""
    runs = {}
    for results in sorted(RECORDS.glob("codex-s/wge/fast-500ep-*/results.json")):
        record = json.loads(results.read_text())
        assert record["config"]["recipe"] == "fast" and record["config"]["epochs"] == 500, results
        runs[str(results.parent.relative_to(RECORDS))] = record["test"]["metrics"]["both"]["mrr"]
    for path in sorted(RECORDS.glob("example/codex-s-fast-500ep-*.json")):
        record = json.loads(path.read_text())
        assert record["epochs"] == 500, path
        runs[str(path.relative_to(RECORDS))] = record["test"]["mrr"]
    return runs


def test_the_readme_quotes_the_range_of_the_main_commands_runs():
    readme = " ".join((ROOT / "README.md").read_text().split())
    quoted = re.search(
        r"500 epochs in about \d+ minutes on 2 CPU cores, to a test MRR of (0\.\d{3})-(0\.\d{3})", readme
    )
    assert quoted, "the main command's range of test MRRs"
    runs = main_command_runs()
    assert len(runs) >= 4  # the trainer's seeds 0-2 and the example's run at least
    assert [float(value) for value in quoted.groups()] == [round(min(runs.values()), 3), round(max(runs.values()), 3)]
    assert "(paper: 0.452;" in readme[quoted.end() : quoted.end() + 200]


def test_the_results_row_of_the_main_command_is_its_seeds_mean():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if "`fast` (the main command), mean of seeds 0-2" in line)
    seeds = [json.loads((RECORDS / f"codex-s/wge/fast-500ep-seed{s}/results.json").read_text()) for s in range(3)]
    mrr = sum(r["test"]["metrics"]["both"]["mrr"] for r in seeds) / 3
    hits = sum(r["test"]["metrics"]["both"]["hits@10"] for r in seeds) / 3
    cells = [cell.strip() for cell in row.split("|")]
    assert cells[7] == f"**{mrr:.3f}**" and cells[8] == f"{100 * hits:.1f}"
