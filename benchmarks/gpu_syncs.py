"""Where a CUDA training step waits for the GPU: the host synchronisations of
:meth:`torch_wge.training.Trainer.train_epoch`, each with the lines of
torch_wge that asked for it.

A step whose Python side never waits can queue its kernels while the GPU
runs the previous ones, so launches cost nothing once the GPU is the slower
side; each synchronisation (``.item()``, ``.tolist()``, a blocking copy, an
operator whose output size depends on the data such as ``torch.unique``)
drains that queue. PyTorch reports them under
``torch.cuda.set_sync_debug_mode("warn")``; this script counts them over
``--batches`` training batches after one warm-up epoch and prints each
distinct site once, with how often it synchronised a batch.

Needs CUDA. Example (FB15k-237 under the large recipe's step)::

    python benchmarks/gpu_syncs.py --dataset fb15k-237 --data-dir data/datasets \\
        --candidates 2000 --json syncs.json
"""

import argparse
import collections
import shutil
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import torch
from bench_speed import DEFAULT_DATA, limit_batches, prepare_root, write_record

import torch_wge


def sync_sites(trainer, batches: int):
    """Runs one epoch of ``batches`` batches under sync-debug mode; returns
    ``{site: count}`` where a site is the innermost torch_wge frames of the call."""
    sites: collections.Counter = collections.Counter()

    package = str(Path(torch_wge.__file__).parent)

    def record(message, category, filename, lineno, file=None, line=None):
        frames = [f for f in traceback.extract_stack()[:-1] if f.filename.startswith((package, __file__))]
        if frames and frames[-1].filename.startswith(package):  # not this script's own switching of the mode
            sites[" <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.line}" for f in reversed(frames[-3:]))] += 1

    with warnings.catch_warnings():  # restores warnings.showwarning on the way out
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            trainer.train_epoch()
            torch.cuda.synchronize()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return {site: count / batches for site, count in sites.most_common()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fb15k-237")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder holding DATASET/train.txt")
    parser.add_argument("--batches", type=int, default=4, help="batches probed (default: 4)")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--hidden-channels", type=int, default=64)
    parser.add_argument("--candidates", type=int, default=2000, help="sampled softmax candidates (0: all)")
    parser.add_argument("--json", help="write the sites to this JSON record")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_syncs.py: needs CUDA")

    from torch_wge.training import TrainConfig, Trainer, load_data

    tmp = Path(tempfile.mkdtemp(prefix="gpu_syncs_"))
    try:
        prepare_root(args.data_dir, args.dataset, tmp / "root")
        config = TrainConfig(
            dataset=args.dataset,
            root=str(tmp / "root"),
            recipe="large",
            device="cuda",
            batch_size=args.batch_size,
            hidden_channels=args.hidden_channels,
            candidates=args.candidates,
        )
        _, data = load_data(config)
        trainer = Trainer(config, data, out_dir=tmp / "run", progress=False)
        limit_batches(trainer, args.batches, args.batch_size)
        trainer.train_epoch()  # warm-up: first-call costs and caches
        sites = sync_sites(trainer, args.batches)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = sum(sites.values())
    print(f"{total:.1f} host synchronisations a batch, {len(sites)} sites:")
    for site, count in sites.items():
        print(f"  {count:6.2f}  {site}")
    if args.json:
        write_record(
            args.json,
            "gpu_syncs",
            {"config": vars(args) | {"data_dir": str(args.data_dir)}, "per_batch": total, "sites": sites},
        )
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
