"""How memory and time grow with the graph: the scaling of an epoch, an evaluation and the peak
memory over synthetic graphs of 2k to 128k entities, and the peak memory of evaluation and of a
training step on a CoDEx-L-sized graph. (Several processes' memory: ``bench_processes.py memory``.)

``scaling``: synthetic knowledge graphs of growing size (``--sizes``, default 2k, 8k, 32k and 128k
entities, about 16 training triples per entity, 50 relations, 5% valid and 5% test triples). They
are random with some structure: every entity has one of 16 types, every relation links a head type
to a tail type, relations are Zipf-distributed, and tails are drawn with a skew that makes hubs, so
that the relation-focused view has a realistic, bounded number of constraints. For each size, in
its own subprocess (so that peak memory figures do not mix), with the paper's WGE settings (256
channels, K = 2, batch 1024, beta = 0.2): the graph views are built, then

- seconds per training epoch: ``--max-batches`` full batches of a random subset of the training
  queries are timed (median of ``--units`` after a warm-up) and scaled to all queries, unless the
  epoch has no more batches than that, in which case whole epochs are timed;
- seconds per full filtered evaluation of test (both directions, encoder included): exact when test
  has at most ``--max-eval-queries`` queries, otherwise the queries of a prefix of test are ranked
  and the ranking time scaled linearly (the encoder forward, timed apart, is added once);
- peak memory: the subprocess's resident set high-water mark (VmHWM), or
  ``torch.cuda.max_memory_allocated`` on CUDA.

It writes a table, ``--json`` and a log-log plot (``--plot``, default
``benchmarks/figures/scaling.png``) with the 1-N reference line "training queries x entities"
through the smallest size.

``prepare``, ``eval``, ``train``, ``all``: a synthetic graph of CoDEx-L's sizes
(:func:`torch_wge.testing.random_kg`: 77,951 entities, 69 relations, 551,193 train, 30,622 valid and
30,622 test triples). ``prepare`` builds it and its graph views once; every measurement then runs in
a fresh subprocess that loads them, builds WGE (64 quaternions, K = 2), resets the peak resident set
size (``/proc/self/clear_refs``, Linux) and reports "peak +MB": the peak during the measured step
minus the resident size just before it.

- ``eval``: filtered ranking (both directions, the encoder run once, under ``torch.no_grad``) of the
  first ``--queries / 2`` test triples, scored ``--chunk`` queries at a time (the
  ``eval_batch_size`` of training);
- ``train``: one training step on ``--batch-size`` queries (encoder over the whole graph, 1-N loss at
  every layer, backward, clipping, Adam), after one warm-up step (which allocates Adam's state and
  the cached adjacencies); also the encoder alone (forward and backward of the sum of its outputs);
- ``all``: ``eval`` with chunks of 256 and 4,000 for 4,000 and 16,000 queries, the whole test split
  in chunks of 1,024, and ``train``, each in a fresh subprocess; ``--json`` writes them as a record.

Examples::

    python benchmarks/bench_memory.py scaling --threads 2 --json scaling.json   # also draws figures/scaling.png
    python benchmarks/bench_memory.py scaling --plot-only scaling.json          # redraw the plot
    python benchmarks/bench_memory.py prepare --graph /tmp/codex-l-synthetic.pt
    python benchmarks/bench_memory.py all --graph /tmp/codex-l-synthetic.pt --json codex-l-memory.json
"""

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict

import torch
from common import (
    HERE,
    Clock,
    cpu_model,
    git_state,
    limit_batches,
    memory_report,
    peak_rss_mb,
    reset_peak_rss,
    rss_mb,
    write_record,
)


# ------------------------------------------------------------------ scaling
def synthetic_kg(
    num_entities: int,
    num_relations: int = 50,
    per_entity: float = 16.0,
    eval_fraction: float = 0.05,
    num_types: int = 16,
    seed: int = 0,
):
    """A random typed KG in the layout of :mod:`torch_wge.datasets` (see the module docstring)."""
    import torch

    from torch_wge.testing import kg_from_triples

    g = torch.Generator().manual_seed(seed)
    n_train = int(per_entity * num_entities)
    total = int(n_train / (1 - 2 * eval_fraction))
    entity_type = torch.randint(num_types, (num_entities,), generator=g)
    order = torch.argsort(entity_type * num_entities + torch.randperm(num_entities, generator=g))
    type_count = torch.bincount(entity_type, minlength=num_types)
    type_start = torch.cumsum(type_count, 0) - type_count
    head_type = torch.randint(num_types, (num_relations,), generator=g)
    tail_type = torch.randint(num_types, (num_relations,), generator=g)
    rel_weight = 1.0 / torch.arange(1, num_relations + 1).double() ** 0.7
    draws = int(total * 1.3) + 100
    rel = torch.multinomial(rel_weight, draws, replacement=True, generator=g)

    def pick(types, skew):
        u = torch.rand(draws, generator=g, dtype=torch.double) ** skew
        offset = (u * type_count[types]).long().clamp_max(type_count[types] - 1)
        return order[type_start[types] + offset]

    heads = pick(head_type[rel], 1.0)
    tails = pick(tail_type[rel], 2.0)  # skewed: low offsets are hubs
    triples = torch.stack([heads, rel, tails], dim=1)
    triples = triples[(heads != tails) & (type_count[head_type[rel]] > 0) & (type_count[tail_type[rel]] > 0)]
    triples = torch.unique(triples, dim=0)
    triples = triples[torch.randperm(triples.size(0), generator=g)[:total]]
    num = triples.size(0)
    split = torch.zeros(num, dtype=torch.long)
    n_eval = int(eval_fraction * num)
    split[num - 2 * n_eval : num - n_eval] = 1
    split[num - n_eval :] = 2
    return kg_from_triples(triples, split, num_entities, num_relations)


def scaling_worker(args) -> Dict[str, Any]:
    import warnings

    warnings.simplefilter("ignore")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    from torch_wge.evaluation import LinkPredictionEvaluator
    from torch_wge.training import TrainConfig, Trainer, evaluate_model, graph_transform, split_triples

    clock = Clock(args.device)

    data = synthetic_kg(args.size, args.relations, args.triples_per_entity, seed=args.seed)
    config = TrainConfig(dataset="synthetic", device=args.device)
    tic = time.perf_counter()
    data = graph_transform(config)(data)
    views_s = time.perf_counter() - tic
    n, r = int(data.num_nodes), int(data.num_relations)
    sizes = {
        "num_entities": n,
        "num_relations": r,
        **{s: int(data[m].sum()) for s, m in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask"))},
        "ef_edges": int(data.ef_edge_index.size(1)),
        "rf_edges": int(data.rf_edge_index.size(1)),
    }
    rss_data = rss_mb()
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as tmp:
        trainer = Trainer(config, data, out_dir=tmp, progress=False)
        num_queries = len(trainer.queries)
        num_batches = trainer.queries.num_batches(config.batch_size)
        per_unit = limit_batches(trainer, args.max_batches, config.batch_size)
        timed_queries = len(trainer.queries)
        times = []
        for i in range(1 + args.units):
            tic = clock()
            trainer.train_epoch()
            if i:
                times.append(clock() - tic)
        epoch_s = statistics.median(times) * num_queries / timed_queries
        train_peak = memory_report(args.device)

        model = trainer.model
        model.eval()
        device = torch.device(args.device)
        graph_inputs = {k: v.to(device) for k, v in model.graph_inputs(data).items()}
        test, known = split_triples(data, "test"), split_triples(data, "all")
        eval_queries = 2 * test.size(0)
        limit = eval_queries if eval_queries <= args.max_eval_queries else args.max_eval_queries
        evaluator = LinkPredictionEvaluator(test[: limit // 2], known, n, r)
        with torch.no_grad():
            model.encode(**graph_inputs)  # warm-up
            tic = clock()
            model.encode(**graph_inputs)
            encode_s = clock() - tic
        evaluate_model(model, graph_inputs, LinkPredictionEvaluator(test[:512], known, n, r))  # warm-up
        tic = clock()
        evaluate_model(model, graph_inputs, evaluator, config.eval_batch_size)
        timed = clock() - tic
        ranked = 2 * (limit // 2)
        eval_s = timed if ranked == eval_queries else encode_s + (timed - encode_s) * eval_queries / ranked
    return {
        "sizes": sizes,
        "train_queries": num_queries,
        "num_batches": num_batches,
        "batches_timed": per_unit,
        "epoch_extrapolated": timed_queries < num_queries,
        "epoch_s": epoch_s,
        "unit_times": times,
        "test_queries": eval_queries,
        "eval_queries_ranked": ranked,
        "eval_extrapolated": ranked < eval_queries,
        "encode_s": encode_s,
        "test_eval_s": eval_s,
        "views_s": views_s,
        "rss_after_views_mb": rss_data,
        "train_peak": train_peak,
        **memory_report(args.device),
        "threads": torch.get_num_threads(),
    }


def plot(record: Dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in record["rows"] if "error" not in row]
    ents = [row["sizes"]["num_entities"] for row in rows]
    work = [row["train_queries"] * row["sizes"]["num_entities"] for row in rows]
    eval_work = [row["test_queries"] * row["sizes"]["num_entities"] for row in rows]
    mem_key = "peak_cuda_mb" if record["device"].startswith("cuda") else "peak_rss_mb"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    panels = [
        ("epoch_s", "seconds per training epoch", work, "training queries x entities"),
        ("test_eval_s", "seconds per filtered test evaluation", eval_work, "test queries x entities"),
        (mem_key, "peak memory (MB)", None, None),
    ]
    for ax, (key, title, ref, ref_label) in zip(axes, panels):
        values = [row[key] for row in rows]
        ax.loglog(ents, values, "o-", label="torch_wge WGE")
        for row, x, y in zip(rows, ents, values):
            extrapolated = (
                row.get("epoch_extrapolated")
                if key == "epoch_s"
                else row.get("eval_extrapolated")
                if key == "test_eval_s"
                else False
            )
            label = f"{y:,.0f}" if y >= 100 else f"{y:.3g}"
            ax.annotate(
                label + ("*" if extrapolated else ""), (x, y), textcoords="offset points", xytext=(4, -12), fontsize=8
            )
        if ref:
            scale = values[0] / ref[0]
            ax.loglog(ents, [w * scale for w in ref], "--", color="gray", label=f"∝ {ref_label}")
        ax.set_xlabel(
            "entities (training triples: " + ", ".join(f"{row['sizes']['train'] / 1e3:.0f}k" for row in rows) + ")",
            fontsize=8,
        )
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"torch_wge WGE scaling on synthetic KGs (~{record['triples_per_entity']:g} train triples per "
        f"entity, {record['relations']} relations, 256 channels, K=2, batch 1024); {record['cpu']}, "
        f"{record['threads']} threads, {record['device']}; * extrapolated",
        fontsize=9,
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"wrote {path}", file=sys.stderr)


def scaling(args) -> None:
    """Each size in its own subprocess; the table, ``--json`` and the plot."""
    if args.worker:
        print(json.dumps(scaling_worker(args)))
        return
    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text()), args.plot)
        return

    import torch

    record: Dict[str, Any] = {
        "command": "python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "device": args.device,
        "threads": args.threads or torch.get_num_threads(),
        "torch": torch.__version__,
        "git": git_state(),
        "triples_per_entity": args.triples_per_entity,
        "relations": args.relations,
        "rows": [],
    }
    header = (
        f"{'entities':>9} {'train':>9} {'queries':>9} {'rf edges':>9} {'views s':>8} {'epoch s':>9} "
        f"{'test q':>7} {'eval s':>8} {'peak MB':>8}  notes"
    )
    lines = [header, "-" * len(header)]
    for size in args.sizes:
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "scaling",
            "--worker",
            "--size",
            str(size),
            "--relations",
            str(args.relations),
            "--triples-per-entity",
            str(args.triples_per_entity),
            "--device",
            args.device,
            "--threads",
            str(args.threads),
            "--max-batches",
            str(args.max_batches),
            "--units",
            str(args.units),
            "--max-eval-queries",
            str(args.max_eval_queries),
            "--seed",
            str(args.seed),
        ]
        print(f"[{size}] running ...", file=sys.stderr, flush=True)
        tic = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            row = {"size": size, "error": f"exit code {proc.returncode}"}
            record["rows"].append(row)
            lines.append(f"{size:>9} failed: {row['error']}")
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"[{size}] done in {time.perf_counter() - tic:.1f} s", file=sys.stderr, flush=True)
        record["rows"].append(row)
        s = row["sizes"]
        mem = row.get("peak_cuda_mb", row["peak_rss_mb"])
        notes = []
        if row["epoch_extrapolated"]:
            notes.append(f"epoch from {row['batches_timed']} of {row['num_batches']} batches")
        if row["eval_extrapolated"]:
            notes.append(f"eval from {row['eval_queries_ranked']} of {row['test_queries']} queries")
        lines.append(
            f"{s['num_entities']:>9} {s['train']:>9} {row['train_queries']:>9} {s['rf_edges'] // 2:>9} "
            f"{row['views_s']:>8.2f} {row['epoch_s']:>9.2f} {row['test_queries']:>7} "
            f"{row['test_eval_s']:>8.2f} {mem:>8.0f}  {'; '.join(notes)}"
        )
    rows = [row for row in record["rows"] if "error" not in row]
    if len(rows) >= 2:
        first, last = rows[0], rows[-1]
        work = (last["train_queries"] * last["sizes"]["num_entities"]) / (
            first["train_queries"] * first["sizes"]["num_entities"]
        )
        eval_work = (last["test_queries"] * last["sizes"]["num_entities"]) / (
            first["test_queries"] * first["sizes"]["num_entities"]
        )
        lines.append("")
        lines.append(
            f"{first['sizes']['num_entities']} -> {last['sizes']['num_entities']} entities: epoch x"
            f"{last['epoch_s'] / first['epoch_s']:.0f} (queries x entities x{work:.0f}), "
            f"test evaluation x{last['test_eval_s'] / first['test_eval_s']:.0f} "
            f"(test queries x entities x{eval_work:.0f}), exponents: epoch "
            f"{math.log(last['epoch_s'] / first['epoch_s']) / math.log(work):.2f}, eval "
            f"{math.log(last['test_eval_s'] / first['test_eval_s']) / math.log(eval_work):.2f} "
            f"per unit of log(queries x entities)"
        )
    record["table"] = lines
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2))
    if args.plot and rows:
        try:
            plot(record, args.plot)
        except ImportError:
            print(
                'matplotlib is not importable (pip install -e ".[plot]"); no plot; '
                f"draw it later with --plot-only {args.json or 'RECORD.json'} --plot {args.plot}",
                file=sys.stderr,
            )


# ------------------------------------------------------------------ a CoDEx-L-sized graph
SIZES = dict(num_entities=77_951, num_relations=69, train=551_193, valid=30_622, test=30_622)


def prepare(path: str) -> None:
    """Builds the CoDEx-L-sized graph and its two views once, into ``path``."""
    import torch_geometric.transforms as T

    from torch_wge.testing import random_kg
    from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

    total = SIZES["train"] + SIZES["valid"] + SIZES["test"]
    tic = time.perf_counter()
    kg = random_kg(
        SIZES["num_entities"],
        SIZES["num_relations"],
        total,
        split=(SIZES["train"] / total, SIZES["valid"] / total),
        seed=0,
    )
    generated = time.perf_counter() - tic
    tic = time.perf_counter()
    data = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.2)])(kg)
    views = time.perf_counter() - tic
    torch.save(data, path)
    print(
        json.dumps(
            {
                "train": int(data.train_mask.sum()),
                "valid": int(data.val_mask.sum()),
                "test": int(data.test_mask.sum()),
                "ef_edges": int(data.ef_edge_index.size(1)),
                "rf_edges": int(data.rf_edge_index.size(1)),
                "generate_s": round(generated, 1),
                "views_s": round(views, 1),
            }
        )
    )


def wge_model(data):
    """WGE with 64 quaternions and K = 2 on ``data``, seeded, and its graph inputs."""
    from torch_wge.nn import WGE

    torch.manual_seed(0)
    model = WGE(int(data.num_nodes), int(data.num_relations), hidden_channels=64, num_layers=2, cached=True)
    return model, model.graph_inputs(data)


def measure_eval(path: str, chunk: int, queries: int) -> dict:
    from torch_wge.evaluation import LinkPredictionEvaluator
    from torch_wge.training import evaluate_model, split_triples

    data = torch.load(path, weights_only=False)
    model, inputs = wge_model(data)
    triples = split_triples(data, "test")[: queries // 2]
    evaluator = LinkPredictionEvaluator(
        triples, split_triples(data, "all"), int(data.num_nodes), int(data.num_relations)
    )
    before = reset_peak_rss()
    tic = time.perf_counter()
    results = evaluate_model(model, inputs, evaluator, batch_size=chunk)
    seconds = time.perf_counter() - tic
    return {
        "what": "eval",
        "chunk": chunk,
        "queries": evaluator.num_queries,
        "rss_before_mb": round(before),
        "peak_plus_mb": round(peak_rss_mb() - before),
        "seconds": round(seconds, 1),
        "scores_per_chunk_mb": round(min(chunk, evaluator.num_queries) * int(data.num_nodes) * 4 / 2**20),
        "mrr": round(results["both.mrr"], 5),
    }


def measure_train(path: str, batch_size: int) -> dict:
    from torch_wge.nn import OneToNLoss
    from torch_wge.training import TrainingQueries, split_triples
    from torch_wge.training.batch_loss import BatchLoss

    data = torch.load(path, weights_only=False)
    model, inputs = wge_model(data)
    queries = TrainingQueries(split_triples(data, "train"), int(data.num_nodes), int(data.num_relations))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    module = BatchLoss(model, OneToNLoss(), inputs).train()
    order = torch.randperm(len(queries), generator=torch.Generator().manual_seed(0))

    def step(index):
        loss = module(*queries.batch(index))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=True)
        optimizer.step()

    before_first = reset_peak_rss()
    tic = time.perf_counter()
    step(order[:batch_size])
    first = (peak_rss_mb() - before_first, time.perf_counter() - tic)
    before = reset_peak_rss()
    tic = time.perf_counter()
    step(order[batch_size : 2 * batch_size])
    steady = (peak_rss_mb() - before, time.perf_counter() - tic)

    optimizer.zero_grad(set_to_none=True)
    before_encoder = reset_peak_rss()
    tic = time.perf_counter()
    encoded = model.encode(**inputs)
    sum(x.sum() for x in encoded.entities + encoded.relations).backward()
    encoder = (peak_rss_mb() - before_encoder, time.perf_counter() - tic)
    num_layers = len(encoded.entities)
    return {
        "what": "train",
        "batch_size": batch_size,
        "queries": len(queries),
        "rss_before_mb": round(before),
        "peak_plus_mb_first_step": round(first[0]),
        "peak_plus_mb": round(steady[0]),
        "seconds": round(steady[1], 1),
        "encoder_peak_plus_mb": round(encoder[0]),
        "encoder_seconds": round(encoder[1], 1),
        "logits_mb": round(num_layers * batch_size * int(data.num_nodes) * 4 / 2**20),
        "parameters_mb": round(sum(p.numel() for p in model.parameters()) * 4 / 2**20),
    }


def measure_all(args) -> None:
    """``eval`` at several chunks and query counts and ``train``, each in a fresh subprocess."""
    runs = [["eval", "--chunk", str(c), "--queries", str(q)] for q in (4_000, 16_000) for c in (256, 4_000)]
    runs += [["eval", "--chunk", "1024"], ["train", "--batch-size", str(args.batch_size)]]
    results = []
    for run in runs:
        out = subprocess.run(
            [sys.executable, __file__, *run, "--graph", args.graph, "--threads", str(args.threads)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        write_record(args.json, "bench_memory", {"graph": SIZES, "threads": args.threads, "results": results})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("scaling", help="epoch, evaluation and peak memory over synthetic graphs of growing size")
    s.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[2000, 8000, 32000, 128000],
        help="numbers of entities (default: 2000 8000 32000 128000)",
    )
    s.add_argument("--triples-per-entity", type=float, default=16.0)
    s.add_argument("--relations", type=int, default=50)
    s.add_argument("--device", default="cpu")
    s.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    s.add_argument(
        "--max-batches", type=int, default=4, help="batches timed per unit, scaled to the full epoch (default: 4)"
    )
    s.add_argument("--units", type=int, default=2, help="timed units after a warm-up (default: 2)")
    s.add_argument(
        "--max-eval-queries",
        type=int,
        default=16384,
        help="rank at most this many test queries and scale (default: 16384)",
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", default=None, help="write the results to this JSON file")
    s.add_argument("--plot", default=str(HERE / "figures" / "scaling.png"), help="PNG to write ('' for none)")
    s.add_argument("--plot-only", default=None, metavar="JSON", help="only redraw the plot from a --json file")
    s.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    s.add_argument("--size", type=int, help=argparse.SUPPRESS)
    helps = {
        "prepare": "build the CoDEx-L-sized graph and its views into --graph",
        "eval": "peak memory and seconds of a filtered evaluation on it",
        "train": "peak memory and seconds of a training step on it",
        "all": "eval and train at several sizes, each in a fresh subprocess",
    }
    for name, text in helps.items():
        c = commands.add_parser(name, help=text)
        c.add_argument("--graph", required=True, help="file of the prepared graph")
        c.add_argument("--threads", type=int, default=1)
        if name == "eval":
            c.add_argument("--chunk", type=int, default=1024, help="queries scored at once (default: 1024)")
            c.add_argument("--queries", type=int, default=2 * SIZES["test"], help="queries ranked (default: all)")
        if name in ("train", "all"):
            c.add_argument("--batch-size", type=int, default=1024, help="queries per batch (default: 1024)")
        if name == "all":
            c.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    if args.command == "scaling":
        return scaling(args)
    torch.set_num_threads(args.threads)
    if args.command == "prepare":
        prepare(args.graph)
    elif args.command == "eval":
        print(json.dumps(measure_eval(args.graph, args.chunk, args.queries)))
    elif args.command == "train":
        print(json.dumps(measure_train(args.graph, args.batch_size)))
    else:
        measure_all(args)


if __name__ == "__main__":
    main()
