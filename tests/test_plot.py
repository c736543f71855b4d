"""``torch-wge plot`` and :mod:`torch_wge.plot`: the figures hold the values of the runs'
logs and of ``evaluate --json`` files; bad input is one line and exit 2."""

import json
import sys

import pytest

from torch_wge.cli import main
from torch_wge.plot import curves_figure, read_relation_table, read_run, relations_figure
from torch_wge.testing import random_kg

pytest.importorskip("matplotlib")  # the `plot` extra (installed with the `test` extra)
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402


@pytest.fixture(scope="module")
def kg_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kg")
    kg = random_kg(30, 3, 240, seed=4)
    for name, mask in (("train", "train"), ("valid", "val"), ("test", "test")):
        rows = zip(*kg.edge_index[:, kg[f"{mask}_mask"]].tolist(), kg.edge_type[kg[f"{mask}_mask"]].tolist())
        (folder / f"{name}.txt").write_text("".join(f"e{h}\tP{r}\te{t}\n" for h, t, r in rows))
    return folder


@pytest.fixture(scope="module")
def trained_runs(kg_folder, tmp_path_factory):
    """Two short runs (WGE, QuatE) of the command line on a small KG."""
    folder = tmp_path_factory.mktemp("runs")
    for name, layers in (("wge", "1"), ("quate", "0")):
        argv = ["train", "--dataset", str(kg_folder), "--root", str(folder / "data"), "--out", str(folder / name)]
        options = [
            "--epochs",
            "4",
            "--eval-every",
            "2",
            "--hidden-channels",
            "2",
            "--num-layers",
            layers,
            "--no-progress",
        ]
        assert main(argv + options + ["--batch-size", "64", "--threads", "1"]) == 0
    return folder / "wge", folder / "quate"


def log_of(run):
    """The log read independently of torch_wge: every line one JSON record."""
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def line_data(line):
    return list(line.get_xdata()), list(line.get_ydata())


def test_curves_hold_the_logged_loss_and_validation_mrr_of_every_run(trained_runs, kg_folder):
    figure = curves_figure([read_run(run) for run in trained_runs])
    (loss_epoch, loss_minutes), (mrr_epoch, mrr_minutes) = figure.axes[:2], figure.axes[2:]
    for index, run in enumerate(trained_runs):
        epochs = [r for r in log_of(run) if r["event"] == "epoch"]
        evals = [r for r in log_of(run) if r["event"] == "eval"]
        assert [r["epoch"] for r in evals] == [2, 4]
        assert line_data(loss_epoch.lines[index]) == ([r["epoch"] for r in epochs], [r["loss"] for r in epochs])
        assert line_data(loss_minutes.lines[index]) == (
            [r["wall_seconds"] / 60 for r in epochs],
            [r["loss"] for r in epochs],
        )
        assert line_data(mrr_epoch.lines[index]) == ([r["epoch"] for r in evals], [r["both.mrr"] for r in evals])
        assert line_data(mrr_minutes.lines[index]) == (
            [r["wall_seconds"] / 60 for r in evals],
            [r["both.mrr"] for r in evals],
        )
        # one colour per run, the same in every panel
        assert len({ax.lines[index].get_color() for ax in figure.axes}) == 1
    assert figure.axes[0].lines[0].get_color() != figure.axes[0].lines[1].get_color()
    labels = [text.get_text() for text in figure.legends[0].get_texts()]
    assert labels == [
        f"{run}: {kg_folder}, {model}, fast recipe, epochs 4, batch size 64, eval every 2, hidden channels 2{layers}"
        for run, model, layers in zip(trained_runs, ("WGE", "QuatE"), (", num layers 1", ""))
    ]


def write_run(folder, records):
    folder.mkdir()
    (folder / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_a_run_with_one_validation_is_drawn_as_a_marker(tmp_path):
    run = write_run(
        tmp_path / "run",
        [
            {"event": "epoch", "epoch": 1, "loss": 0.9, "wall_seconds": 30.0},
            {"event": "epoch", "epoch": 2, "loss": 0.7, "wall_seconds": 60.0},
            {"event": "eval", "split": "valid", "epoch": 2, "wall_seconds": 66.0, "both.mrr": 0.25},
        ],
    )
    figure = curves_figure([read_run(run)])
    mrr_by_epoch, mrr_by_minutes = figure.axes[2].lines[0], figure.axes[3].lines[0]
    assert line_data(mrr_by_epoch) == ([2], [0.25]) and line_data(mrr_by_minutes) == ([1.1], [0.25])
    assert mrr_by_epoch.get_marker() == "o" and mrr_by_minutes.get_marker() == "o"
    assert line_data(figure.axes[1].lines[0]) == ([0.5, 1.0], [0.9, 0.7])
    assert figure.axes[0].lines[0].get_marker() in (None, "None", "")  # two points: a line


def overlaps(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_the_legend_covers_no_panel_and_no_axis_label(trained_runs, tmp_path):
    many = [read_run(trained_runs[i % 2], label=f"a run with a long description, number {i}") for i in range(6)]
    for figure in (curves_figure(many), curves_figure(many[:1])):
        canvas = FigureCanvasAgg(figure)
        canvas.draw()
        renderer = canvas.get_renderer()
        legend = figure.legends[0].get_window_extent(renderer)
        for ax in figure.axes:
            for item in (ax, ax.xaxis.label, ax.yaxis.label, *ax.get_xticklabels()):
                assert not overlaps(legend, item.get_window_extent(renderer)), item


def test_relations_figure_holds_each_files_head_and_tail_mrr_of_the_most_frequent_relations(tmp_path):
    names = ["P1 (spouse)", "P2 (child)", "P3 (sibling)"]
    first = {"relation_names": names, "checkpoint": "runs/a/best.pt", "split": "valid", "per_relation": []}
    counts = {0: 5, 1: 9, 2: 2}  # queries of each relation: 1, then 0, then 2
    for r, n in counts.items():
        first["per_relation"] += [
            {"relation": r, "side": "both", "count": n, "mrr": 0.5},
            {"relation": r, "side": "head", "count": n // 2, "mrr": 0.1 + r / 10},
            {"relation": r, "side": "tail", "count": n - n // 2, "mrr": 0.6 + r / 10},
        ]
    second = {**first, "checkpoint": "runs/b/best.pt", "per_relation": [dict(row) for row in first["per_relation"]]}
    for row in second["per_relation"]:
        row["mrr"] /= 2
    paths = []
    for name, content in (("a.json", first), ("b.json", second)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(content))
    figure = relations_figure([read_relation_table(p) for p in paths], top=2)
    head, tail = figure.axes
    assert [t.get_text() for t in head.get_yticklabels()] == ["P2 (child)", "P1 (spouse)"]  # most queries first
    for ax, side_mrr in ((head, lambda r: 0.1 + r / 10), (tail, lambda r: 0.6 + r / 10)):
        bars = [patch.get_width() for patch in ax.patches]
        assert bars == pytest.approx([side_mrr(1), side_mrr(0), side_mrr(1) / 2, side_mrr(0) / 2])
    labels = [text.get_text() for text in figure.legends[0].get_texts()]
    assert labels == ["runs/a/best.pt (valid)", "runs/b/best.pt (valid)"]
    chosen = relations_figure([read_relation_table(paths[0])], relations=[2, 0])  # e.g. by training frequency
    assert [t.get_text() for t in chosen.axes[0].get_yticklabels()] == ["P3 (sibling)", "P1 (spouse)"]
    assert [patch.get_width() for patch in chosen.axes[0].patches] == pytest.approx([0.3, 0.1])


def test_plot_command_draws_runs_and_evaluate_json(trained_runs, tmp_path, capsys):
    out = tmp_path / "curves.png"
    assert main(["plot", *map(str, trained_runs), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG") and sorted(p.name for p in tmp_path.iterdir()) == ["curves.png"]
    assert capsys.readouterr().out.strip() == f"figure in {out}"
    evaluated = tmp_path / "valid.json"
    assert main(["evaluate", str(trained_runs[0] / "best.pt"), "--split", "valid", "--json", str(evaluated)]) == 0
    table = read_relation_table(evaluated)
    assert table.label == f"{trained_runs[0] / 'best.pt'} (valid)" and len(table.relation_names) == 3
    assert main(["plot", str(evaluated), "--out", str(tmp_path / "relations.svg")]) == 0
    assert b"<svg" in (tmp_path / "relations.svg").read_bytes()


def bad_inputs(tmp_path, runs):
    empty_log = write_run(tmp_path / "empty", [])
    not_json = tmp_path / "notes.json"
    not_json.write_text("not json")
    no_rows = tmp_path / "summary.json"
    no_rows.write_text(json.dumps({"metrics": {}}))
    no_loss = write_run(tmp_path / "no-loss", [{"event": "epoch", "epoch": 1, "wall_seconds": 2.0}])
    bad_row = tmp_path / "bad-row.json"
    bad_row.write_text(json.dumps({"relation_names": ["P1"], "per_relation": [{"relation": 3, "side": "head"}]}))
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"per_relation": ' + "[" * 100_000 + "]" * 100_000 + "}")
    deep_log = write_run(tmp_path / "deep-log", [])
    (deep_log / "log.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    out = ["--out", str(tmp_path / "x.png")]
    return {
        "deep json": (["plot", str(deep_json), *out], f"{deep_json}: nested deeper than 32 levels"),
        "deep log": (["plot", str(deep_log), *out], f"{deep_log / 'log.jsonl'}, line 1: nested deeper than 32 levels"),
        "missing": (["plot", str(tmp_path / "nowhere"), *out], f"{tmp_path / 'nowhere'}: no such run folder or file"),
        "no log": (["plot", str(tmp_path), *out], f"{tmp_path}: not a run folder"),
        "no epoch": (["plot", str(empty_log), *out], f"{empty_log / 'log.jsonl'}: no epoch recorded yet"),
        "not json": (["plot", str(not_json), *out], f"{not_json}: not valid JSON"),
        "no per-relation rows": (["plot", str(no_rows), *out], f"{no_rows}: no per-relation metrics"),
        "record without loss": (["plot", str(no_loss), *out], f"{no_loss / 'log.jsonl'}, line 1: an epoch record"),
        "bad row": (["plot", str(bad_row), *out], f"{bad_row}: per-relation row 1 is no relation's metrics"),
        "both kinds": (["plot", str(runs[0]), str(no_rows), *out], "not both"),
        "unknown format": (["plot", str(runs[0]), "--out", str(tmp_path / "x.xyz")], "unknown figure format '.xyz'"),
        "missing folder": (["plot", str(runs[0]), "--out", str(tmp_path / "no" / "x.png")], str(tmp_path / "no")),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "no log",
        "no epoch",
        "record without loss",
        "not json",
        "no per-relation rows",
        "bad row",
        "both kinds",
        "unknown format",
        "missing folder",
        "deep json",
        "deep log",
    ],
)
def test_bad_input_is_one_line_and_exit_2(case, trained_runs, tmp_path, capsys):
    cases = bad_inputs(tmp_path, trained_runs)
    assert len(cases) == 12  # each one tested
    argv, named = cases[case]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("torch-wge plot: error: ") and named in err, err
    assert not (tmp_path / "x.png").exists()


def test_without_matplotlib_the_command_says_how_to_install_it(trained_runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    assert main(["plot", str(trained_runs[0]), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert (
        err == "torch-wge plot: error: plot needs matplotlib, which is not installed: pip install 'torch_wge[plot]'\n"
    )


def test_the_legend_names_the_model_settings_in_which_runs_differ(tmp_path):
    from torch_wge.training import TrainConfig

    records = [{"event": "epoch", "epoch": 1, "loss": 0.9, "wall_seconds": 30.0}]
    settings = [
        {"hidden_channels": 8, "alpha0": 0.3, "beta": 0.4, "num_layers": 1},  # a tune trial's
        {"hidden_channels": 64, "alpha0": 0.9, "beta": 0.2, "num_layers": 2, "seed": 1},  # the defaults
    ]
    runs = []
    for number, drawn in enumerate(settings):
        folder = write_run(tmp_path / str(number), records)
        config = TrainConfig(dataset="codex-s", recipe="fast", **drawn).to_dict()
        (folder / "config.json").write_text(json.dumps(config))
        runs.append(read_run(folder))
    figure = curves_figure(runs)
    assert [text.get_text() for text in figure.legends[0].get_texts()] == [
        f"{tmp_path / '0'}: codex-s, WGE, fast recipe, hidden channels 8, num layers 1, alpha0 0.3, beta 0.4, seed 0",
        f"{tmp_path / '1'}: codex-s, WGE, fast recipe, hidden channels 64, num layers 2, alpha0 0.9, beta 0.2, seed 1",
    ]


def test_run_label_names_the_settings_changed_from_the_recipe():
    from torch_wge.plot import describe_run
    from torch_wge.training import TrainConfig

    assert describe_run(TrainConfig(dataset="codex-m", recipe="large").to_dict()) == "codex-m, WGE, large recipe"
    config = TrainConfig(dataset="codex-m", recipe="fast", num_layers=0, batch_size=4096, lr=2e-2, candidates=2000)
    assert describe_run(config.to_dict()) == ("codex-m, QuatE, fast recipe, batch size 4096, lr 0.02, candidates 2000")
