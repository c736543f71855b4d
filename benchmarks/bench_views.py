"""Time and peak memory of building the WGE graph views.

Copies the triple files of each dataset from ``--data-dir`` into a temporary
raw folder, processes them with :mod:`torch_wge.datasets` (timed as "load"),
then builds each view in a fresh subprocess and reports its peak memory:
"peak +MB" is the peak resident set size during the first build minus the
resident size just before it (the peak is reset through
``/proc/self/clear_refs`` on Linux), so torch and the loaded graph are not
counted. Times are the median of ``--repeat`` runs after one warm-up run.

Example::

    python benchmarks/bench_views.py --dataset codex-m fb15k-237 --json benchmarks/records/views/views.json
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import DEFAULT_DATA, cpu_model, git_state, peak_rss_mb, reset_peak_rss

VIEWS = {  # name: (transform class in torch_wge.transforms, its arguments)
    "ef": ("EntityFocusedTransform", {}),
    "rf": ("RelationFocusedTransform", {"beta": 0.2}),  # the default: no r_s - r_o edges
    "rf-rr": ("RelationFocusedTransform", {"beta": 0.2, "relation_edges": True}),
    "levi": ("LeviGraphTransform", {}),
}


def worker(args) -> None:
    import torch

    import torch_wge.transforms
    from torch_wge.datasets import get_dataset

    if args.threads:
        torch.set_num_threads(args.threads)
    data = get_dataset(args.dataset, args.root, log=False)[0]
    name, kwargs = VIEWS[args.view]
    transform = getattr(torch_wge.transforms, name)(**kwargs)
    copy = data.clone()
    before = reset_peak_rss()
    out = transform(copy)
    peak = peak_rss_mb() - before
    key = {"ef": "ef_edge_index", "levi": "levi_edge_index"}.get(args.view, "rf_edge_index")
    edges = out[key].size(1) // 2
    times = []
    for _ in range(args.repeat):
        copy = data.clone()
        start = time.perf_counter()
        transform(copy)
        times.append(time.perf_counter() - start)
    print(
        json.dumps(
            {
                "median": statistics.median(times),
                "min": min(times),
                "peak_mb": peak,
                "edges": edges,
                "threads": torch.get_num_threads(),
            }
        )
    )


def naive_pairs(data) -> int:
    # (incoming triple, outgoing triple) combinations at every entity, with
    # inverse triples added: what enumerating triple pairs would form.
    import torch

    h, t = data.edge_index[:, data.train_mask]
    deg = torch.bincount(torch.cat([h, t]), minlength=data.num_nodes)
    return int((deg * deg).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=["codex-m", "fb15k-237"])
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA),
        help="folder with <dataset>/{train,valid,test}.txt (default: ../shared/datasets)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch default)")
    parser.add_argument("--views", nargs="+", default=list(VIEWS), choices=list(VIEWS))
    parser.add_argument("--json", default=None, help="write the results, with command, commit and machine, here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--view", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.dataset = args.dataset[0]
        return worker(args)

    import warnings

    import torch

    from torch_wge.datasets import dataset_statistics, get_dataset

    warnings.simplefilter("ignore")
    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"threads {args.threads or torch.get_num_threads()}, "
        f"repeat {args.repeat}"
    )
    header = f"{'dataset':<10} {'view':<9} {'edges (undir.)':>14} {'median s':>9} {'min s':>8} {'peak +MB':>9}"
    rows, results = [], []
    with tempfile.TemporaryDirectory() as root:
        for name in args.dataset:
            raw = Path(root) / name / "raw"
            raw.mkdir(parents=True)
            for split in ("train.txt", "valid.txt", "test.txt"):
                shutil.copyfile(Path(args.data_dir) / name / split, raw / split)
            start = time.perf_counter()
            data = get_dataset(name, root, log=False)[0]
            load = time.perf_counter() - start
            stats = dataset_statistics(data)
            print(
                f"{name}: {data.num_nodes} entities, {data.num_relations} "
                f"relations, {int(data.train_mask.sum())} train triples; "
                f"parse+process {load:.2f} s; RF constraints "
                f"{stats['rf_constraints']} ({stats['rf_constraints_kept']} "
                f"kept), pairs {stats['rf_pairs']} "
                f"({stats['rf_pairs_kept']} kept); naive in x out triple "
                f"combinations {naive_pairs(data):,}"
            )
            for view in args.views:
                cmd = [
                    sys.executable,
                    __file__,
                    "--worker",
                    "--dataset",
                    name,
                    "--root",
                    root,
                    "--view",
                    view,
                    "--repeat",
                    str(args.repeat),
                    "--threads",
                    str(args.threads),
                ]
                out = json.loads(
                    subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
                )
                rows.append(
                    f"{name:<10} {view:<9} {out['edges']:>14,} "
                    f"{out['median']:>9.3f} {out['min']:>8.3f} "
                    f"{out['peak_mb']:>9.1f}"
                )
                results.append({"dataset": name, "view": view, "transform": VIEWS[view], "load_s": load, **out})
    print()
    print(header)
    print("\n".join(rows))
    if args.json:
        record = {
            "command": "python benchmarks/bench_views.py " + " ".join(sys.argv[1:]),
            "date": datetime.date.today().isoformat(),
            "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "torch": torch.__version__},
            "git": git_state(),
            "results": results,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
