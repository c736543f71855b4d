"""Milliseconds of the collectives the sharded encoder uses, on gloo between local processes.

For each size (rows per process, ``--channels`` float32 columns) the processes time, in turn and
``--repeats`` times each:

- ``all_gather``: :func:`torch.distributed.all_gather_single` of every process's rows (the
  encoder's forward gather);
- ``reduce_scatter``: :func:`torch.distributed.reduce_scatter_single` of the gathered buffer back
  to each process's rows (the textbook backward of that gather);
- ``all_reduce``: :func:`torch.distributed.all_reduce` of the whole gathered buffer, each process
  then keeping its rows (another way to that reduce-scatter);
- ``all_to_all``: :func:`torch.distributed.all_to_all_single` of the gathered buffer's blocks, each
  to its process, and the sum of the blocks received (what the backward does on gloo).

Reports the median of each and writes every timing to ``--json``. One thread per process; time it
on a quiet machine with a core per process.

Example::

    python benchmarks/bench_collectives.py --processes 2 --rows 1000 7508 \\
        --json benchmarks/records/collectives/gloo-2x1.json
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from bench_speed import write_record

OPERATIONS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


def _job(rank: int, world_size: int, port: int, rows: List[int], channels: int, repeats: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    timings: Dict[str, Dict[str, List[float]]] = {}
    for count in rows:
        own = torch.randn(count, channels)
        gathered = torch.empty(world_size * count, channels)
        received = torch.empty_like(gathered)

        def all_to_all() -> None:
            dist.all_to_all_single(received, gathered)
            torch.sum(received.view(world_size, count, channels), 0, out=own)

        operations = {
            "all_gather": lambda: dist.all_gather_single(gathered, own),
            "reduce_scatter": lambda: dist.reduce_scatter_single(own, gathered),
            "all_reduce": lambda: dist.all_reduce(gathered),
            "all_to_all": all_to_all,
        }
        timings[str(count)] = {name: [] for name in operations}
        for _ in range(repeats):
            for name, operation in operations.items():
                operation()  # a warm-up, and every process starts together
                dist.barrier()
                start = time.perf_counter()
                operation()
                timings[str(count)][name].append(1000 * (time.perf_counter() - start))
    if rank == 0:
        Path(out).write_text(json.dumps(timings))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="local processes (default: 2)")
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[1000, 7508], help="rows per process (default: 1000 7508)"
    )
    parser.add_argument("--channels", type=int, default=256, help="float32 columns (default: 256)")
    parser.add_argument("--repeats", type=int, default=20, help="timings of each collective and size (default: 20)")
    parser.add_argument("--port", type=int, default=29533, help="a free local TCP port (default: 29533)")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_collectives_") as tmp:
        out = str(Path(tmp) / "timings.json")
        mp.spawn(
            _job,
            args=(args.processes, args.port, args.rows, args.channels, args.repeats, out),
            nprocs=args.processes,
        )
        timings = json.loads(Path(out).read_text())
    medians = {rows: {name: statistics.median(values) for name, values in ops.items()} for rows, ops in timings.items()}
    for rows, ops in medians.items():
        megabytes = int(rows) * args.channels * 4 / 1e6
        line = ", ".join(f"{name} {ops[name]:.2f} ms" for name in OPERATIONS)
        print(f"{rows:>7s} rows per process ({megabytes:.1f} MB): {line}")
    if args.json:
        record = {
            "backend": "gloo",
            "processes": args.processes,
            "channels": args.channels,
            "milliseconds": timings,
            "median_milliseconds": medians,
        }
        write_record(args.json, "bench_collectives", record)


if __name__ == "__main__":
    main()
