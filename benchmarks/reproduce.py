"""Run one row of the paper's tables (or a sensitivity point) and keep its JSON record.

Every row is a :class:`torch_wge.training.TrainConfig` on top of the paper's CoDEx-S
setting; the run folder ``<out>/<row>`` holds ``log.jsonl`` (validation MRR every
``eval_every`` epochs, with wall time), ``results.json`` (best validation and test
metrics, per side and per relation) and checkpoints, and a killed run continues
with ``--resume``.

    python benchmarks/reproduce.py --list
    python benchmarks/reproduce.py codex-s/wge --epochs 3000
    python benchmarks/reproduce.py codex-s/ablation/gcn --epochs 200 --lr 2e-3
    python benchmarks/reproduce.py codex-s/beta/0.5 --epochs 200 --resume

Datasets are read from ``--root`` (``<root>/<dataset>/raw``) or downloaded there.
"""
import argparse
import json
from pathlib import Path

import torch

from torch_wge.training import TrainConfig, Trainer, load_data

ROWS = {
    # Table 2: WGE and its strongest baseline, QuatE (K = 0)
    **{f"{d}/wge": dict(dataset=d) for d in ("codex-s", "codex-m", "codex-l", "litwd1k", "litwd19k", "litwd48k", "fb15k-237")},
    **{f"{d}/quate": dict(dataset=d, num_layers=0) for d in ("codex-s", "codex-m", "litwd1k", "fb15k-237")},
    # Table 3 ablations (CoDEx-S validation)
    "codex-s/ablation/no-predicate-entities": dict(predicate_entities=False, relation_edges=True),  # only r_s - r_o edges
    "codex-s/ablation/gcn": dict(conv="gcn"),
    "codex-s/ablation/entity-view-only": dict(views="entity"),
    "codex-s/ablation/relation-view-only": dict(views="relation"),
    "codex-s/ablation/levi-graph": dict(views="levi"),
    "codex-s/ablation/with-relation-edges": dict(relation_edges=True),
    # Figure 2: sensitivity to beta and to the embedding size (CoDEx-S validation)
    **{f"codex-s/beta/{b / 10:.1f}": dict(beta=b / 10) for b in range(1, 10)},
    **{f"codex-s/channels/{c}": dict(channels=c) for c in (32, 64, 128, 256, 512, 1024)},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("row", nargs="?", help="row name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the rows and their settings")
    parser.add_argument("--epochs", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=None, help="default: 5e-4 (the paper's CoDEx-S/M setting)")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--root", default="data")
    parser.add_argument("--out", default="runs/reproduce")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.list or not args.row:
        for name, settings in ROWS.items():
            print(f"{name:45s} {settings}")
        return
    if args.row not in ROWS:
        parser.error(f"unknown row {args.row!r}; see --list")
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = {"dataset": "codex-s", **ROWS[args.row]}
    if args.lr is not None:
        settings["lr"] = args.lr
    elif settings["dataset"] == "codex-l":
        settings["lr"] = 1e-4
    config = TrainConfig(root=args.root, epochs=args.epochs, eval_every=args.eval_every, seed=args.seed, **settings)
    _, data = load_data(config)
    out = Path(args.out) / args.row
    result = Trainer(config, data, out).fit(resume=args.resume)
    valid, test = result["valid"]["metrics"]["both"], result["test"]["metrics"]["both"]
    print(json.dumps({"row": args.row, "epochs": result["epochs_trained"], "best_epoch": result["best_epoch"],
                      "wall_seconds": round(result["wall_seconds"]), "valid_mrr": valid["mrr"],
                      "valid_hits@10": valid["hits@10"], "test_mrr": test["mrr"], "test_hits@10": test["hits@10"]}))


if __name__ == "__main__":
    main()
