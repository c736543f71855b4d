"""Time of PyG's ``KGEModel.test()`` on CoDEx-S test triples for torch_wge's
``WGEKGE`` and ``QuatE`` (untrained, 64 quaternions, WGE with two layers), and
optionally ``WGEKGE`` of a baseline checkout, in one run: each model is timed
in its own subprocess, the models alternating over ``--rounds`` rounds, and
the median of the rounds is reported.

PyG's ``test()`` calls ``model(h, r, tails)`` for every test triple and every
``batch_size`` candidate tails, so a model that encodes the whole graph in
``forward`` pays one encoder pass per call; ``WGEKGE`` encodes once per
evaluation.

    python benchmarks/bench_pyg_test.py --baseline /path/to/previous/checkout \\
        --json benchmarks/records/pyg-test/codex-s/COMMIT.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_speed import DEFAULT_DATA, cpu_model, git_state, prepare_root  # noqa: E402

WORKER = r"""
import json, sys, time
import torch
import torch_geometric.transforms as T
from torch_wge.datasets import CoDEx
from torch_wge.data import kg_triples
from torch_wge.nn.kge import QuatE, WGEKGE
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

model_name, root, triples, batch_size, threads = sys.argv[1:6]
torch.set_num_threads(int(threads))
torch.manual_seed(0)
views = T.Compose([EntityFocusedTransform(), RelationFocusedTransform()])
data = views(CoDEx(root, name="s", log=False)[0])
n, r = int(data.num_nodes), int(data.num_relations)
if model_name == "quate":
    model = QuatE(n, r, hidden_channels=64)
else:
    model = WGEKGE(n, r, hidden_channels=64, data=data, num_layers=2)
model.eval()
head, rel, tail = kg_triples(data, "test")[: int(triples)].t()
with torch.no_grad():
    model.test(head[:2], rel[:2], tail[:2], batch_size=int(batch_size), log=False)  # warm-up
    tic = time.perf_counter()
    mean_rank, mrr, hits = model.test(head, rel, tail, batch_size=int(batch_size), log=False)
print(json.dumps({"seconds": time.perf_counter() - tic, "mrr": mrr}))
"""


def time_model(checkout: Path, model: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, "-c", WORKER, model, str(args.root), str(args.triples)]
    command += [str(args.batch_size), str(args.threads)]
    out = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder holding codex-s/train.txt")
    parser.add_argument("--root", type=Path, default=Path("/tmp/bench_pyg_test"), help="scratch dataset root")
    parser.add_argument("--baseline", type=Path, help="a previous checkout whose WGEKGE is timed too")
    parser.add_argument("--triples", type=int, default=200, help="test triples ranked (default: 200)")
    parser.add_argument("--batch-size", type=int, default=1024, help="candidate tails per forward (default: 1024)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the record here")
    args = parser.parse_args()
    prepare_root(args.data_dir, "codex-s", args.root)

    runs = {"quate": (HERE.parent, "quate"), "wgekge": (HERE.parent, "wgekge")}
    if args.baseline:
        runs["wgekge@baseline"] = (args.baseline, "wgekge")
    seconds = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (checkout, model) in runs.items():
            seconds[name].append(time_model(checkout, model, args)["seconds"])
    median = {name: statistics.median(values) for name, values in seconds.items()}
    for name, value in median.items():
        print(f"{name:16s} {value:8.2f} s for {args.triples} triples ({value / median['quate']:.2f}x QuatE)")
    if args.json:
        from torch_wge.io import write_json

        record = {
            "command": " ".join(sys.argv),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": {"cpu": cpu_model(), "threads": args.threads, "load_1min_at_end": os.getloadavg()[0]},
            "git": git_state(),
            **({"baseline_git": git_state(args.baseline)} if args.baseline else {}),
            "triples": args.triples,
            "batch_size": args.batch_size,
            "seconds": seconds,
            "median_seconds": median,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, record)


if __name__ == "__main__":
    main()
