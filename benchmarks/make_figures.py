"""Figures from run folders (matplotlib required: ``pip install -e ".[plot]"``); the curves
and per-relation figures are :mod:`torch_wge.plot`'s (``torch-wge plot``), from records.

    # validation MRR against epochs and against wall time, one line per run
    # (time to accuracy: the paper's recipe beside the fast one, on log axes)
    python benchmarks/make_figures.py curves benchmarks/records/codex-s/wge/paper-3000ep benchmarks/records/codex-s/wge/fast-500ep-seed0 --log-x --out benchmarks/figures/codex-s-time-to-accuracy.png
    python benchmarks/make_figures.py curves runs/codex-s-wge runs/reproduce/codex-s/quate --out benchmarks/figures/codex-s-curves.png
    # per-relation MRR, head and tail prediction, for the 10 most frequent relations (WGE beside QuatE);
    # (a run stopped early is first closed with `python benchmarks/reproduce.py ROW --finish`)
    python benchmarks/make_figures.py relations runs/codex-s-wge runs/reproduce/codex-s/quate --split valid --out benchmarks/figures/codex-s-relations.png
    # best validation MRR of each run against a setting (beta, hidden_channels), from run folders or
    # from the runs of a `reproduce.py --summary` record that --select names
    python benchmarks/make_figures.py sensitivity benchmarks/records/studies/codex-s-paper-60ep-lr2e-3.json --select '*-beta*' --setting beta --out benchmarks/figures/codex-s-beta.png

Run folders and the records ``benchmarks/reproduce.py`` keeps (``benchmarks/records/...``) both work.
"""

import argparse
import fnmatch
import json
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from torch_wge.plot import RelationTable, curves_figure, read_run, relations_figure, save_figure  # noqa: E402

RECORDS = Path(__file__).resolve().parent / "records"


def legend_label(run: Path):
    """A record's legend label: its path under ``benchmarks/records``
    (``codex-m/wge/large-80ep``: dataset, model, recipe, epochs and variant), short enough
    for the legend to fit the figure; ``None`` (the run folder and its settings) for a run
    folder elsewhere."""
    try:
        return run.resolve().relative_to(RECORDS).as_posix()
    except ValueError:
        return None


def curves(runs, out, log_x=False):
    """Validation MRR against epochs and wall time (``torch-wge plot`` draws the loss too)."""
    logs = [read_run(run, legend_label(run)) for run in runs]
    save_figure(curves_figure(logs, curves=("mrr",), log_x=log_x), out)


def relations(runs, split, out, root=None):
    """Head and tail MRR of the 10 most frequent training relations, from each record's
    results.json (relations and their labels read from the dataset of the first run, under
    ``root`` or else the root the run trained with)."""
    from torch_wge.training import open_dataset

    config = json.loads((runs[0] / "config.json").read_text())
    dataset = open_dataset(config["dataset"], root or config["root"])
    data = dataset[0]
    frequency = Counter(data.edge_type[data.train_mask].tolist())
    labels = getattr(dataset, "relation_labels", None) or [None] * len(dataset.relation_names)
    names = [label or name for name, label in zip(dataset.relation_names, labels)]
    tables = []
    for run in runs:
        record = json.loads((run / "results.json").read_text())
        label = f"{read_run(run, legend_label(run)).label}, epoch {record['best_epoch']:,}"
        tables.append(RelationTable(label, names, record[split]["per_relation"]))
    save_figure(relations_figure(tables, relations=[r for r, _ in frequency.most_common(10)]), out)


def sensitivity_points(runs, select=None):
    """(settings, best validation MRR, epochs) of each run: of a run folder's ``results.json``, or of
    the runs of a ``reproduce.py --summary`` record whose names match one of the ``select`` patterns."""
    points = []
    for run in runs:
        if run.is_file():  # a summary record
            for entry in json.loads(run.read_text())["runs"]:
                if select is None or any(fnmatch.fnmatch(entry["name"], pattern) for pattern in select):
                    points.append((entry["config"], entry["valid"]["both"]["mrr"], entry["epochs"]))
        else:
            result = json.loads((run / "results.json").read_text())
            points.append((result["config"], result["valid"]["metrics"]["both"]["mrr"], result["epochs_trained"]))
    return points


def sensitivity(runs, setting, out, select=None):
    """Best validation MRR of each run against ``setting`` (runs differing only in it)."""
    points = sorted(sensitivity_points(runs, select), key=lambda point: point[0][setting])
    if not points:
        raise SystemExit("make_figures.py sensitivity: no run selected")
    config, _, epochs = points[0]
    values = [c[setting] for c, _, _ in points]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(values, [mrr for _, mrr, _ in points], marker="o")
    if setting in ("hidden_channels", "channels"):  # sizes double from point to point; "channels": older records
        ax.set_xscale("log", base=2)
        ax.set_xticks(values, [str(value) for value in values])
    ax.set_xlabel(setting)
    ax.set_ylabel("best validation MRR")
    ax.set_title(f"{config['dataset']}, {epochs} epochs at lr {config['lr']:g} each", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["curves", "relations", "sensitivity"])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (sensitivity: or a summary record)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--split", default="valid", choices=["valid", "test"])
    parser.add_argument("--setting", default="beta")
    parser.add_argument("--select", nargs="+", help="sensitivity: the summary's runs whose names match (glob)")
    parser.add_argument(
        "--root", help="relations: the datasets' root (<root>/<dataset>/raw; default: the first run's own root)"
    )
    parser.add_argument("--log-x", action="store_true", help="curves: logarithmic epoch and time axes")
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if args.kind == "curves":
        curves(args.runs, args.out, args.log_x)
    elif args.kind == "relations":
        relations(args.runs, args.split, args.out, args.root)
    else:
        sensitivity(args.runs, args.setting, args.out, args.select)


if __name__ == "__main__":
    main()
