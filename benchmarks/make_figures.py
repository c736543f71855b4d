"""Figures from run folders (matplotlib required: ``pip install -e ".[plot]"``).

    # validation MRR against epochs and against wall time, one line per run
    # (time to accuracy: the paper's recipe beside the fast one, on log axes)
    python benchmarks/make_figures.py curves benchmarks/records/codex-s/wge benchmarks/records/fast/codex-s/wge --log-x --out benchmarks/figures/codex-s-time-to-accuracy.png
    python benchmarks/make_figures.py curves runs/codex-s-wge runs/reproduce/codex-s/quate --out benchmarks/figures/codex-s-curves.png
    # per-relation MRR, head and tail prediction, for the 10 most frequent relations (WGE beside QuatE);
    # (a run stopped early is first closed with `python benchmarks/reproduce.py ROW --finish`)
    python benchmarks/make_figures.py relations runs/codex-s-wge runs/reproduce/codex-s/quate --split valid --out benchmarks/figures/codex-s-relations.png
    # best validation MRR of each run against a setting (beta, channels)
    python benchmarks/make_figures.py sensitivity benchmarks/records/short-60ep/codex-s/beta/* --setting beta --out benchmarks/figures/codex-s-beta.png

Run folders and the records ``benchmarks/reproduce.py`` keeps (``benchmarks/records/...``) both work.
"""

import argparse
import json
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_log(run: Path):
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if line.strip()]


def label_of(run: Path) -> str:
    config = json.loads((run / "config.json").read_text())
    model = "QuatE" if config["num_layers"] == 0 else f"WGE ({config['views']}, {config['conv']})"
    recipe = config.get("recipe", "paper")  # runs from before recipes existed used the paper's
    objective = config.get("objective", "bce")
    ema = f", EMA {config['ema_decay']:g}" if config.get("ema_decay") else ""
    return f"{config['dataset']} {model}, {recipe} recipe, {objective}, lr {config['lr']:g}{ema}"


def curves(runs, out, log_x=False):
    fig, (by_epoch, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        evals = [r for r in read_log(run) if r["event"] == "eval"]
        mrr = [r["both.mrr"] for r in evals]
        by_epoch.plot([r["epoch"] for r in evals], mrr, label=label_of(run))
        by_time.plot([r["wall_seconds"] / 60 for r in evals], mrr, label=label_of(run))
    for ax, xlabel in ((by_epoch, "epoch"), (by_time, "wall time (min, training + validation)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation MRR (filtered)")
        ax.grid(alpha=0.3)
        if log_x:
            ax.set_xscale("log")
    by_epoch.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def relations(runs, split, out):
    from torch_wge.training import open_dataset

    records = [json.loads((run / "results.json").read_text()) for run in runs]
    config = json.loads((runs[0] / "config.json").read_text())
    dataset = open_dataset(config["dataset"], config["root"])
    data = dataset[0]
    frequency = Counter(data.edge_type[data.train_mask].tolist())
    top = [r for r, _ in frequency.most_common(10)]
    labels = getattr(dataset, "relation_labels", None)
    names = [(labels[r] if labels and labels[r] else dataset.relation_names[r])[:28] for r in top]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    width = 0.8 / len(runs)
    for side, ax in zip(("head", "tail"), axes):
        for i, (run, record) in enumerate(zip(runs, records)):
            table = {(row["relation"], row["side"]): row["mrr"] for row in record[split]["per_relation"]}
            values = [table.get((r, side), 0.0) for r in top]
            label = f"{label_of(run)}, epoch {record['best_epoch']:,}"
            ax.bar([x + i * width for x in range(len(top))], values, width, label=label)
        ax.set_title(f"{side} prediction ({split})")
        ax.set_xticks(
            [x + width * (len(runs) - 1) / 2 for x in range(len(top))], names, rotation=60, ha="right", fontsize=7
        )
        ax.set_ylabel("MRR (filtered)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def sensitivity(runs, setting, out):
    """Best validation MRR of each run against ``setting`` (runs differing only in it)."""
    results = sorted(
        (json.loads((run / "results.json").read_text()) for run in runs), key=lambda result: result["config"][setting]
    )
    config = results[0]["config"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(
        [r["config"][setting] for r in results], [r["valid"]["metrics"]["both"]["mrr"] for r in results], marker="o"
    )
    if setting == "channels":
        ax.set_xscale("log", base=2)
        ax.set_xticks([r["config"][setting] for r in results], [str(r["config"][setting]) for r in results])
    ax.set_xlabel(setting)
    ax.set_ylabel("best validation MRR")
    ax.set_title(f"{config['dataset']}, {results[0]['epochs_trained']} epochs at lr {config['lr']:g} each", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["curves", "relations", "sensitivity"])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--out", required=True)
    parser.add_argument("--split", default="valid", choices=["valid", "test"])
    parser.add_argument("--setting", default="beta")
    parser.add_argument("--log-x", action="store_true", help="curves: logarithmic epoch and time axes")
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if args.kind == "curves":
        curves(args.runs, args.out, args.log_x)
    elif args.kind == "relations":
        relations(args.runs, args.split, args.out)
    else:
        sensitivity(args.runs, args.setting, args.out)


if __name__ == "__main__":
    main()
