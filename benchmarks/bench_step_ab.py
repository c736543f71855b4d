"""A change's effect on a training step: ``bench_processes.py phases`` run on the code before the
change and on this checkout's, alternating in fresh processes, round after round, in one run.

``--old-code`` is a checkout of the code before (``git worktree add --detach /tmp/old <commit>``);
its ``torch_wge`` is imported through ``PYTHONPATH``, the benchmark script is this checkout's, so
both sides are measured the same way. Each round runs both sides, the old one first in odd rounds
and the new one first in even rounds. A setup's step time in a run is the median over its steps
of its slowest process; the record holds every run's and their medians over the rounds.

Time it on a quiet machine: other load skews the two sides unevenly.

``--precision`` sets both sides' ``TrainConfig.precision`` (default: each code's own default) and
``--old-precision`` the old side's alone, so that one checkout against itself (``--old-code .``)
compares two precisions.

Example::

    git worktree add --detach /tmp/old HEAD~1
    python benchmarks/bench_step_ab.py --old-code /tmp/old --rounds 5 --dataset fb15k-237 \\
        --recipe large --setups 1x2 2x1-sharded --json benchmarks/records/speed/fb15k-237/change-ab.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

from bench_processes import setup_name
from common import write_record

HERE = Path(__file__).resolve().parent


def slowest_step(run: Dict) -> Dict[str, float]:
    """Each setup's step in ms in one ``bench_processes.py phases`` record: the median of its slowest
    process."""
    return {
        setup: max(statistics.median(process["ms"]["step"]) for process in processes)
        for setup, processes in run["milliseconds"].items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-code", required=True, help="a checkout of the code before the change")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each side (default: 5)")
    parser.add_argument("--dataset", default="codex-s", help="as bench_processes.py phases (default: codex-s)")
    parser.add_argument("--data-dir", help="as bench_processes.py phases")
    parser.add_argument("--recipe", default="fast", help="training recipe (default: fast)")
    parser.add_argument(
        "--setups",
        nargs="+",
        type=setup_name,
        default=["1x2", "2x1-sharded"],
        help="as bench_processes.py phases: 1x1, 1x2, 2x1-replicated, 2x1-sharded, 1x1-pair, ... (default: 1x2 2x1-sharded)",
    )
    parser.add_argument("--steps", type=int, default=14, help="optimiser steps per process (default: 14)")
    parser.add_argument("--precision", help="both sides' precision (default: each code's default)")
    parser.add_argument("--old-precision", help="the old side's precision (default: --precision)")
    parser.add_argument("--what", default="", help="what the change is, for the record")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    old_code = Path(args.old_code).resolve()
    if not (old_code / "torch_wge" / "__init__.py").is_file():
        parser.error(f"--old-code {args.old_code}: no torch_wge package there")
    old_commit = subprocess.run(
        ["git", "-C", str(old_code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()

    sides = {"old": {**os.environ, "PYTHONPATH": str(old_code)}, "new": {**os.environ, "PYTHONPATH": str(HERE.parent)}}
    precisions = {"old": args.old_precision or args.precision, "new": args.precision}
    rounds: List[Dict] = []
    with tempfile.TemporaryDirectory(prefix="bench_step_ab_") as tmp:
        for number in range(1, args.rounds + 1):
            order = ["old", "new"] if number % 2 else ["new", "old"]
            entry: Dict = {"round": number, "order": order}
            for side in order:
                out = Path(tmp) / f"{side}-{number}.json"
                command = [sys.executable, str(HERE / "bench_processes.py"), "phases", "--dataset", args.dataset]
                command += ["--recipe", args.recipe, "--steps", str(args.steps), "--setups", *args.setups]
                command += ["--json", str(out)] + (["--data-dir", args.data_dir] if args.data_dir else [])
                command += ["--precision", precisions[side]] if precisions[side] else []
                done = subprocess.run(command, env=sides[side], capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"round {number}, {side} code failed:\n{done.stderr[-2000:]}")
                entry[side] = slowest_step(json.loads(out.read_text()))
            rounds.append(entry)
            figures = ", ".join(
                f"{setup} {entry['old'][setup]:.1f} -> {entry['new'][setup]:.1f}" for setup in args.setups
            )
            print(f"round {number}: {figures} ms a step (old -> new)", flush=True)
    medians = {
        setup: {side: statistics.median(entry[side][setup] for entry in rounds) for side in ("old", "new")}
        for setup in args.setups
    }
    for setup, pair in medians.items():
        print(f"{setup}: {pair['old']:.1f} -> {pair['new']:.1f} ms a step, {pair['old'] / pair['new']:.3f}x")
    if args.json:
        record = {
            "what": args.what,
            "old_code": old_commit,
            "dataset": args.dataset,
            "recipe": args.recipe,
            "precision": {side: precision or "the code's default" for side, precision in precisions.items()},
            "steps": args.steps,
            "step_ms": "per run and setup, the median over its steps (2 warm-up steps not counted) of its slowest process",
            "rounds": rounds,
            "median_over_rounds_ms": medians,
            "speedup": {setup: pair["old"] / pair["new"] for setup, pair in medians.items()},
        }
        write_record(args.json, "bench_step_ab", record)


if __name__ == "__main__":
    main()
