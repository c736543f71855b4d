"""Where a training step's time goes, process by process: forward, backward, optimiser, and the
time spent inside each collective.

Setups (``--setups``), each in fresh processes:

- ``1x1``, ``1x2``: one process with 1 or 2 threads;
- ``2x1-replicated``, ``2x1-sharded``: ``torchrun --nproc_per_node 2``, 1 thread each, the encoder
  replicated or sharded (``--encoder``);
- ``1x1-pair``: two independent one-thread processes at the same time, which tells what the two
  processes cost each other without communicating (memory bandwidth, caches).

Each process builds the trainer of ``torch-wge train`` for ``--dataset`` and ``--recipe`` and runs
``--steps`` optimiser steps on the epoch's first batches, the first ``--warmup`` not counted, with
a barrier before each step. Every collective of ``torch.distributed`` that the step calls from
Python is timed (the all-gathers and all-to-alls of the sharded encoder, the batch norms'
all-reduces); :class:`~torch.nn.parallel.DistributedDataParallel`'s gradient all-reduce runs in
its C++ reducer and stays inside "backward". With ``--barriers`` every collective is preceded by a
timed barrier, which parts waiting for the other process from the collective itself. Reports the
median of each phase per process and writes every step's figures to ``--json``.

Time it on a quiet machine: other load skews the setups unevenly.

Example::

    python benchmarks/bench_step_phases.py --dataset fb15k-237 --recipe large --steps 14 \\
        --json benchmarks/records/speed/fb15k-237/step-phases.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

from bench_speed import prepare_root, write_record

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
COLLECTIVES = ("all_gather_single", "all_to_all_single", "all_reduce", "reduce_scatter_single")
#: setup -> (launcher, threads, encoder, processes started side by side)
SETUPS = {
    "1x1": ([sys.executable], 1, "sharded", 1),
    "1x2": ([sys.executable], 2, "sharded", 1),
    "2x1-replicated": (TORCHRUN, 1, "replicated", 1),
    "2x1-sharded": (TORCHRUN, 1, "sharded", 1),
    "1x1-pair": ([sys.executable], 1, "sharded", 2),
}


def time_collectives(totals: Dict[str, float], barriers: bool) -> None:
    """Wraps the collectives of ``torch.distributed`` so that each call adds its seconds to
    ``totals[name]`` (and, with ``barriers``, those of a barrier before it to ``totals["wait " + name]``)."""
    import torch.distributed as dist

    def timed(name, collective):
        def call(*args, **kwargs):
            if barriers:
                start = time.perf_counter()
                dist.barrier(group=kwargs.get("group"))
                totals["wait " + name] += time.perf_counter() - start
            start = time.perf_counter()
            result = collective(*args, **kwargs)
            totals[name] += time.perf_counter() - start
            return result

        return call

    for name in COLLECTIVES:
        setattr(dist, name, timed(name, getattr(dist, name)))


def worker(args) -> None:
    """One process of a setup: writes ``{"rank", "ms"}``, every counted step's phases in ms, as a JSON
    file in ``args.results``."""
    import torch
    import torch.distributed as dist

    from torch_wge.training import TrainConfig
    from torch_wge.training.allocator import keep_freed_memory
    from torch_wge.training.data import load_data
    from torch_wge.training.trainer import Trainer

    keep_freed_memory()  # as torch-wge train does
    torch.set_num_threads(args.threads)
    config = TrainConfig(
        dataset=args.dataset, root=args.root, recipe=args.recipe, encoder=args.encoder, device="cpu", seed=0
    )
    _, data = load_data(config, log=False)
    with tempfile.TemporaryDirectory(prefix="bench_step_phases_") as out:
        trainer = Trainer(config, data, out, progress=False)
        totals: Dict[str, float] = defaultdict(float)
        time_collectives(totals, args.barriers)
        world = trainer.dist.world_size
        steps: Dict[str, List[float]] = defaultdict(list)
        trainer.loss_module.train()
        batches = trainer.queries.batch_indices(config.batch_size, trainer.generator)
        for step, chunk in zip(range(args.steps), batches):
            totals.clear()
            if world > 1:
                dist.barrier()
            start = time.perf_counter()
            first, stop = trainer.dist.shard(chunk.numel())
            heads, relations, positives = trainer.queries.batch(chunk[first:stop])
            loss = trainer.loss_module(heads, relations, positives, world * (stop - first) / chunk.numel())
            forward = time.perf_counter()
            in_forward = dict(totals)
            trainer.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            backward = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), config.grad_clip, foreach=True)
            trainer.optimizer.step()
            loss.item()
            end = time.perf_counter()
            if step < args.warmup:
                continue
            phases = {"step": end - start, "forward": forward - start, "backward": backward - forward}
            phases["optimiser"] = end - backward
            phases["collectives in forward"] = sum(v for k, v in in_forward.items() if not k.startswith("wait"))
            phases["collectives in backward"] = sum(v for k, v in totals.items() if not k.startswith("wait"))
            phases["collectives in backward"] -= phases["collectives in forward"]
            phases.update(totals)
            for name, seconds in phases.items():
                steps[name].append(1000 * seconds)
        rank = dist.get_rank() if dist.is_initialized() else 0
        result = {"rank": rank, "ms": steps}
        (Path(args.results) / f"{os.getpid()}.json").write_text(json.dumps(result))


def run_setup(name: str, args, root: Path) -> List[Dict]:
    """Runs a setup; each of its processes' ``{"rank", "ms"}``."""
    launcher, threads, encoder, side_by_side = SETUPS[name]
    results = root.parent / f"results-{name}"
    results.mkdir()
    command = launcher + [__file__, "--worker", "--results", str(results), "--dataset", args.dataset]
    command += ["--root", str(root)]
    command += ["--recipe", args.recipe, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    command += ["--threads", str(threads), "--encoder", encoder] + (["--barriers"] if args.barriers else [])
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    processes = [subprocess.Popen(command, env=env) for _ in range(side_by_side)]
    for process in processes:
        if process.wait() != 0:
            raise SystemExit(f"setup {name} failed (exit {process.returncode})")
    return [json.loads(path.read_text()) for path in sorted(results.glob("*.json"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="codex-s", help="a folder name under --data-dir (default: codex-s)")
    parser.add_argument(
        "--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"), help="folder of the raw datasets"
    )
    parser.add_argument("--recipe", default="fast", help="training recipe (default: fast)")
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS), help="(default: all)")
    parser.add_argument("--steps", type=int, default=14, help="optimiser steps per process (default: 14)")
    parser.add_argument("--warmup", type=int, default=2, help="first steps not counted (default: 2)")
    parser.add_argument("--barriers", action="store_true", help="time a barrier before every collective")
    parser.add_argument("--json", help="write the record here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--encoder", default="sharded", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.steps <= args.warmup:
        parser.error("--steps must be larger than --warmup")

    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_step_phases_") as tmp:
        root = Path(tmp) / "data"
        prepare_root(Path(args.data_dir), args.dataset, root)
        # the dataset is processed once, before anything is timed
        subprocess.run([sys.executable, "-m", "torch_wge", "stats", "--dataset", args.dataset, "--root", str(root)])
        for name in args.setups:
            results[name] = sorted(run_setup(name, args, root), key=lambda process: process["rank"])
            for index, process in enumerate(results[name]):
                medians = {phase: statistics.median(ms) for phase, ms in process["ms"].items()}
                figures = ", ".join(f"{phase} {ms:.1f}" for phase, ms in medians.items())
                print(f"{name:15s} process {index}: {figures} (ms, medians)", flush=True)
    if args.json:
        record = {
            "dataset": args.dataset,
            "recipe": args.recipe,
            "steps": args.steps,
            "warmup": args.warmup,
            "barriers": args.barriers,
            "milliseconds": results,
        }
        write_record(args.json, "bench_step_phases", record)


if __name__ == "__main__":
    main()
