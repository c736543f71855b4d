"""PyG's own kge training loop (``examples/kge_fb15k_237.py``: ``model.loader``,
``model.loss``, Adam, ``model.test``) for torch_wge's ``QuatE`` and PyG's
``ComplEx`` at the same ``hidden_channels``, in one process, interleaved.

Both models train side by side from the same seed: each epoch runs in blocks
of ``--block`` batches, alternating the model (and which model goes first)
block by block, so that a change in the machine's load falls on both. An
epoch's time is the sum of its blocks; the reported figure is the median over
``--epochs`` epochs and the ratio QuatE / ComplEx of those medians. ``test()``
is PyG's call, ``model.test(head, rel, tail, batch_size=20000, k=10)`` on the
first ``--test-triples`` triples of ``--split``, repeated ``--test-repeats``
times alternating the models; the median is reported, and the raw tail MRR
(PyG's metric, every entity a candidate, nothing filtered) of all triples of
the split after the last epoch, counted the same way for both models from
their all-candidate scores (:func:`torch_wge.evaluation.kge_score_fn`).
QuatE holds 4 real numbers per channel and ComplEx 2, so at equal
``hidden_channels`` the width alone costs QuatE 2x.

The record also holds each model's score motion: the mean absolute change
of the scores of 2,000 training triples after 1, 10 and ``--motion-steps``
steps of the loop from a fresh model, i.e. how far the learning rate moves
each model's scores.

With ``--profile N`` the script also prints ``torch.profiler`` tables of N
training batches and one ``test()`` of 20 triples of each model (sorted by
self CPU time) and stores their top rows in the record.

Example::

    python benchmarks/bench_kge_loop.py --dataset fb15k-237 --json benchmarks/records/kge-loop/fb15k-237/lr0.01.json
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import torch
from bench_speed import cpu_model, git_state, prepare_root
from torch_geometric.nn.kge import ComplEx

import torch_wge
from torch_wge.data import kg_triples, num_kg_relations
from torch_wge.datasets import get_dataset
from torch_wge.evaluation import kge_score_fn
from torch_wge.io import write_json
from torch_wge.nn.kge import QuatE

MODELS = {"ComplEx": ComplEx, "QuatE": QuatE}
DEFAULT_DATA = os.environ.get(
    "TORCH_WGE_SHARED_DATASETS", str(Path(__file__).resolve().parent / ".." / ".." / "shared" / "datasets")
)


def load_triples(data_dir: str, name: str, split: str):
    """``(num_nodes, num_relations, train [T, 3], evaluated [E, 3])`` of a dataset copied from ``data_dir``."""
    with tempfile.TemporaryDirectory(prefix="bench_kge_loop_") as root:
        prepare_root(Path(data_dir), name, Path(root))
        data = get_dataset(name, root)[0]
    return data.num_nodes, num_kg_relations(data), kg_triples(data, "train"), kg_triples(data, split)


@torch.no_grad()
def raw_tail_mrr(model, num_relations: int, triples: torch.Tensor, chunk: int = 256) -> float:
    """Raw tail MRR: the rank of each tail among all entities' scores, ties
    counted for the candidates of smaller id (a stable descending order)."""
    score_fn = kge_score_fn(model.eval(), num_relations)
    reciprocal = []
    for part in triples.split(chunk):
        scores = score_fn(part[:, 0], part[:, 1])
        tail = part[:, 2].view(-1, 1)
        target = scores.gather(1, tail)
        ids = torch.arange(scores.size(1)).view(1, -1)
        ahead = (scores > target) | ((scores == target) & (ids < tail))
        reciprocal.append(1.0 / (1.0 + ahead.sum(dim=1).double()))
    return float(torch.cat(reciprocal).mean())


def train_interleaved(models, optimizers, train, args) -> Dict[str, List[float]]:
    """Trains every model for ``args.epochs`` epochs of PyG's loop, alternating blocks of batches."""
    head, rel, tail = train.t()
    loaders = {
        name: model.loader(head_index=head, rel_type=rel, tail_index=tail, batch_size=args.batch_size, shuffle=True)
        for name, model in models.items()
    }
    epoch_s: Dict[str, List[float]] = {name: [] for name in models}
    names = list(models)
    for epoch in range(args.epochs):
        batches = {name: iter(loader) for name, loader in loaders.items()}
        seconds = dict.fromkeys(names, 0.0)
        losses = dict.fromkeys(names, 0.0)
        running = list(names)
        block = 0
        while running:
            order = running if block % 2 == 0 else running[::-1]
            for name in order:
                model, optimizer = models[name], optimizers[name]
                model.train()
                tic = time.perf_counter()
                for _ in range(args.block):
                    batch = next(batches[name], None)
                    if batch is None:
                        running.remove(name)
                        break
                    optimizer.zero_grad()
                    loss = model.loss(*batch)
                    loss.backward()
                    optimizer.step()
                    losses[name] += loss.item() * batch[0].numel()
                seconds[name] += time.perf_counter() - tic
            block += 1
        for name in names:
            epoch_s[name].append(seconds[name])
        print(
            f"epoch {epoch + 1}: "
            + ", ".join(f"{n} {seconds[n]:.2f} s loss {losses[n] / train.size(0):.4f}" for n in names),
            flush=True,
        )
    return epoch_s


def score_motion(num_nodes: int, num_relations: int, train: torch.Tensor, args) -> Dict[str, Dict[str, float]]:
    """Mean absolute change of the scores of 2,000 training triples over the
    first steps of PyG's loop, each model fresh from ``args.seed``: how far
    one Adam learning rate moves each model's scores."""
    probe = train[torch.randperm(train.size(0), generator=torch.Generator().manual_seed(args.seed + 1))[:2000]].t()
    checkpoints = (1, 10, args.motion_steps)
    out = {}
    for name, cls in MODELS.items():
        torch.manual_seed(args.seed)
        model = cls(num_nodes=num_nodes, num_relations=num_relations, hidden_channels=args.hidden_channels)
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        loader = model.loader(*train.t(), batch_size=args.batch_size, shuffle=True)
        with torch.no_grad():
            before = model(*probe)
        out[name] = {}
        for step, batch in enumerate(loader, start=1):
            optimizer.zero_grad()
            model.loss(*batch).backward()
            optimizer.step()
            if step in checkpoints:
                with torch.no_grad():
                    out[name][f"after_{step}_steps"] = float((model(*probe) - before).abs().mean())
            if step == args.motion_steps:
                break
    return out


def time_tests(models, triples: torch.Tensor, args) -> Dict[str, Dict[str, Any]]:
    """PyG's ``model.test`` on ``triples``, repeated, alternating the models."""
    head, rel, tail = triples.t()
    out: Dict[str, Dict[str, Any]] = {name: {"seconds": []} for name in models}
    names = list(models)
    for repeat in range(args.test_repeats):
        for name in names if repeat % 2 == 0 else names[::-1]:
            model = models[name].eval()
            tic = time.perf_counter()
            mean_rank, mrr, hits = model.test(head, rel, tail, batch_size=args.test_batch_size, k=10, log=False)
            out[name]["seconds"].append(time.perf_counter() - tic)
            out[name].update(mean_rank=mean_rank, mrr=mrr, hits_at_10=hits)
    return out


def profile(models, train, triples, args) -> Dict[str, Any]:
    """``torch.profiler`` top rows of ``args.profile`` training batches and one ``test()`` of 20 triples."""
    from torch.profiler import profile as torch_profile

    head, rel, tail = train.t()
    out = {}
    for name, model in models.items():
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        loader = model.loader(head_index=head, rel_type=rel, tail_index=tail, batch_size=args.batch_size, shuffle=True)
        batches = [batch for batch, _ in zip(loader, range(args.profile + 1))]
        for phase in ("train", "test"):
            with torch_profile() as prof:
                if phase == "train":
                    model.train()
                    for batch in batches[1:]:
                        optimizer.zero_grad()
                        model.loss(*batch).backward()
                        optimizer.step()
                else:
                    model.eval()
                    model.test(*triples[:20].t(), batch_size=args.test_batch_size, k=10, log=False)
            table = prof.key_averages()
            print(f"\n{name} {phase}:\n" + table.table(sort_by="self_cpu_time_total", row_limit=15))
            rows = sorted(table, key=lambda e: e.self_cpu_time_total, reverse=True)[:15]
            out[f"{name}.{phase}"] = [
                {"op": e.key, "self_cpu_ms": e.self_cpu_time_total / 1e3, "calls": e.count} for e in rows
            ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fb15k-237")
    parser.add_argument("--data-dir", default=DEFAULT_DATA, help="folder of <dataset>/{train,valid,test}.txt")
    parser.add_argument("--split", default="valid", choices=["valid", "test"], help="the triples test() ranks")
    parser.add_argument("--hidden-channels", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate, for both models")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--block", type=int, default=10, help="batches per timed block")
    parser.add_argument("--test-triples", type=int, default=500, help="triples of the timed test() calls")
    parser.add_argument("--test-batch-size", type=int, default=20000)
    parser.add_argument("--test-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--motion-steps", type=int, default=50, help="steps of the score-motion probe")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also profile N training batches")
    parser.add_argument("--shared", action="store_true", help="say in the record that other jobs shared the machine")
    parser.add_argument("--json", default=None, help="write the record (command, commit, machine, date) here")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    num_nodes, num_relations, train, evaluated = load_triples(args.data_dir, args.dataset, args.split)
    print(f"{args.dataset}: {num_nodes} entities, {num_relations} relations, {train.size(0)} training triples")
    models, optimizers = {}, {}
    for name, cls in MODELS.items():
        torch.manual_seed(args.seed)
        models[name] = cls(num_nodes=num_nodes, num_relations=num_relations, hidden_channels=args.hidden_channels)
        optimizers[name] = torch.optim.Adam(models[name].parameters(), lr=args.lr)
    torch.manual_seed(args.seed)

    epoch_s = train_interleaved(models, optimizers, train, args)
    tests = time_tests(models, evaluated[: args.test_triples], args)
    results: Dict[str, Any] = {}
    for name, model in models.items():
        results[name] = {
            "real_parameters": sum(p.numel() for p in model.parameters()),
            "epoch_s": epoch_s[name],
            "epoch_s_median": statistics.median(epoch_s[name]),
            "test_s": tests[name]["seconds"],
            "test_s_median": statistics.median(tests[name]["seconds"]),
            "test_result": {k: tests[name][k] for k in ("mean_rank", "mrr", "hits_at_10")},
            f"raw_tail_mrr_{args.split}_all": raw_tail_mrr(model, num_relations, evaluated),
        }
    ratios = {key: results["QuatE"][key] / results["ComplEx"][key] for key in ("epoch_s_median", "test_s_median")}
    for name, r in results.items():
        print(
            f"{name:8s} epoch {r['epoch_s_median']:.2f} s, test() of {args.test_triples} triples "
            f"{r['test_s_median']:.3f} s, raw tail MRR ({args.split}, all {evaluated.size(0)}) "
            f"{r[f'raw_tail_mrr_{args.split}_all']:.4f}"
        )
    print(f"QuatE / ComplEx: epoch {ratios['epoch_s_median']:.2f}x, test() {ratios['test_s_median']:.2f}x")
    record = {
        "command": "python benchmarks/bench_kge_loop.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # the checkout whose torch_wge was measured (PYTHONPATH may point to another one than the script's)
        "git": git_state(Path(torch_wge.__file__).resolve().parents[1]),
        "script_git": git_state(),
        "machine": {
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "torch_wge": str(Path(torch_wge.__file__).parent),
            "shared_with_other_jobs": args.shared,
            "load_average_1_5_15_min_before": load_before,
            "load_average_1_5_15_min_after": os.getloadavg(),
        },
        "settings": {k: v for k, v in vars(args).items() if k not in ("json",)},
        "sizes": {
            "entities": num_nodes,
            "relations": num_relations,
            "train": train.size(0),
            args.split: evaluated.size(0),
        },
        "results": results,
        "ratio_quate_over_complex": ratios,
    }
    record["score_motion"] = score_motion(num_nodes, num_relations, train, args)
    print("mean |score change| over the first steps:", json.dumps(record["score_motion"]))
    if args.profile:
        record["profile"] = profile(models, train, evaluated, args)
    if args.json:
        write_json(args.json, record)
        print(f"record: {args.json}")
    else:
        print(json.dumps(record["ratio_quate_over_complex"]))


if __name__ == "__main__":
    main()
