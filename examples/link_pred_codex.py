"""Train WGE on a CoDEx dataset and report filtered link-prediction metrics.

With no arguments this is the paper's CoDEx-S setting (K = 2 layers, 256 real
channels, beta = 0.2, alpha_0 = 0.9, Adam lr 5e-4, batch 1024, label smoothing
0.1, up to 3000 epochs, validation MRR every 10 epochs; the best checkpoint is
applied to the test split):

    python examples/link_pred_codex.py
    python examples/link_pred_codex.py --dataset codex-m --epochs 500
    python examples/link_pred_codex.py --num-layers 0       # plain QuatE
    python examples/link_pred_codex.py --out runs/codex-s --resume   # continue a killed run

The raw files are downloaded to ``--root`` (default ``data``) unless already
there: place ``train.txt``, ``valid.txt`` and ``test.txt`` in
``<root>/<dataset>/raw/`` to run offline.
"""
import argparse
import os

import torch

from torch_wge.cli import positive_int, run_reporting_errors
from torch_wge.training import TrainConfig, Trainer, load_data
from torch_wge.training.checkpoint import vocabulary_digest

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--dataset", default="codex-s", choices=["codex-s", "codex-m", "codex-l"])
parser.add_argument("--root", default="data", help="dataset folder (default: data)")
parser.add_argument("--out", default=None, help="run folder (default: runs/<dataset>)")
parser.add_argument("--resume", action="store_true", help="continue the run in --out")
parser.add_argument("--epochs", type=int, default=3000)
parser.add_argument("--lr", type=float, default=None, help="default: 5e-4 (1e-4 for codex-l)")
parser.add_argument("--batch-size", type=int, default=1024)
parser.add_argument("--channels", type=int, default=256)
parser.add_argument("--num-layers", type=int, default=2)
parser.add_argument("--beta", type=float, default=0.2)
parser.add_argument("--alpha0", type=float, default=0.9)
parser.add_argument("--eval-every", type=int, default=10)
parser.add_argument("--patience", type=int, default=None, help="early stopping, in validations")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--device", default=None, help="default: cuda when available")
parser.add_argument("--threads", type=positive_int, default=None)
parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
args = parser.parse_args()

if args.threads:
    torch.set_num_threads(args.threads)
config = TrainConfig(
    dataset=args.dataset,
    root=args.root,
    epochs=args.epochs,
    lr=args.lr if args.lr is not None else (1e-4 if args.dataset == "codex-l" else 5e-4),
    batch_size=args.batch_size,
    channels=args.channels,
    num_layers=args.num_layers,
    beta=args.beta,
    alpha0=args.alpha0,
    eval_every=args.eval_every,
    patience=args.patience,
    seed=args.seed,
    device=args.device,
)
try:
    config.validate()
except ValueError as error:
    parser.error(str(error))


def main() -> None:
    dataset, data = load_data(config)
    print(f"{args.dataset}: {data.num_nodes} entities, {data.num_relations} relations, "
          f"{int(data.train_mask.sum())}/{int(data.val_mask.sum())}/{int(data.test_mask.sum())} triples")
    vocabulary = vocabulary_digest(dataset.entity_names, dataset.relation_names)
    result = Trainer(config, data, args.out or f"runs/{args.dataset}", vocabulary=vocabulary).fit(resume=args.resume)
    if int(os.environ.get("RANK", 0)) != 0:  # under torchrun, only rank 0 reports
        return
    test = result["test"]["metrics"]["both"]
    print(f"best validation epoch {result['best_epoch']} of {result['epochs_trained']}, "
          f"{result['wall_seconds']:.0f} s of training and validation")
    print(f"test (filtered, realistic ranks, both directions): MRR {test['mrr']:.4f} | "
          f"H@1 {test['hits@1']:.4f} | H@3 {test['hits@3']:.4f} | H@10 {test['hits@10']:.4f}")


# every expected failure (offline download, unwritable --out, full disk, ...) is one line, exit code 2
raise SystemExit(run_reporting_errors("link_pred_codex", main, args.debug))
