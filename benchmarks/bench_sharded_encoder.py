"""Seconds per training epoch with one process and with two, the encoder replicated or sharded.

Three setups of ``torch-wge train`` on the same data and settings, side by side in one run:

- ``1x2``: one process with 2 threads;
- ``2x1-replicated``: ``torchrun --nproc_per_node 2``, 1 thread each, ``--encoder replicated``
  (every process runs the whole encoder);
- ``2x1-sharded``: the same with ``--encoder sharded`` (each process its share of the encoder's rows).

Each round trains every setup for ``--epochs`` epochs in a fresh run folder, the setups' order
rotating from round to round; the seconds of each epoch but the first (a warm-up) are read from the
run's ``log.jsonl`` (training only: validation is not in them). Reports the median per setup and
the speed-ups, and writes them with every epoch's seconds to ``--json``. Arguments after ``--`` go
to every ``torch-wge train`` (``--recipe fast --candidates 500``, ``--recipe large``, ...).

Time it on a quiet machine with at least 2 free cores: other load skews the setups unevenly.

Example::

    python benchmarks/bench_sharded_encoder.py --dataset codex-s --epochs 4 --rounds 2 \\
        --json benchmarks/records/sharded-codex-s-fast.json -- --recipe fast --candidates 500
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

from bench_speed import prepare_root, write_record

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
SETUPS = {
    "1x2": [sys.executable, "-m", "torch_wge", "train", "--threads", "2"],
    "2x1-replicated": TORCHRUN + ["-m", "torch_wge", "train", "--threads", "1", "--encoder", "replicated"],
    "2x1-sharded": TORCHRUN + ["-m", "torch_wge", "train", "--threads", "1", "--encoder", "sharded"],
}


def epoch_seconds(command: List[str], out: Path) -> List[float]:
    """Runs ``command`` into the run folder ``out``; the seconds of each of its epochs."""
    subprocess.run(command + ["--out", str(out)], check=True)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [record["seconds"] for record in records if record["event"] == "epoch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="codex-s", help="a folder name under --data-dir (default: codex-s)")
    parser.add_argument(
        "--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"), help="folder of the raw datasets"
    )
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run, the first a warm-up (default: 4)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of every setup (default: 2)")
    parser.add_argument("--json", help="write the record here")
    parser.add_argument("train_args", nargs="*", help="after --: arguments of every torch-wge train")
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first is a warm-up)")

    with tempfile.TemporaryDirectory(prefix="bench_sharded_") as tmp:
        root = Path(tmp) / "data"
        prepare_root(Path(args.data_dir), args.dataset, root)
        common = ["--dataset", args.dataset, "--root", str(root), "--device", "cpu", "--no-progress"]
        common += ["--epochs", str(args.epochs), "--eval-every", str(args.epochs)] + args.train_args
        # the dataset is processed once, before anything is timed
        subprocess.run([sys.executable, "-m", "torch_wge", "stats", "--dataset", args.dataset, "--root", str(root)])
        seconds: Dict[str, List[float]] = {name: [] for name in SETUPS}
        names = list(SETUPS)
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                out = Path(tmp) / f"{name}-{round_}"
                seconds[name] += epoch_seconds(SETUPS[name] + common, out)[1:]
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, median in medians.items():
        print(f"{name:16s} {median:8.3f} s per epoch  ({len(seconds[name])} epochs)")
    speedups = {
        "sharded_over_replicated": medians["2x1-replicated"] / medians["2x1-sharded"],
        "sharded_over_one_process": medians["1x2"] / medians["2x1-sharded"],
    }
    for name, value in speedups.items():
        print(f"{name}: {value:.2f}x")
    if args.json:
        record = {
            "dataset": args.dataset,
            "train_args": args.train_args,
            "epochs_per_run": args.epochs,
            "rounds": args.rounds,
            "seconds_per_epoch": seconds,
            "median_seconds_per_epoch": medians,
            "speedups": speedups,
        }
        write_record(args.json, "bench_sharded_encoder", record)


if __name__ == "__main__":
    main()
