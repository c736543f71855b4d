"""Peak memory of evaluation and of one training batch on a CoDEx-L-sized graph.

The graph is synthetic (:func:`torch_wge.testing.random_kg`) with CoDEx-L's
sizes: 77,951 entities, 69 relations, 551,193 train, 30,622 valid and
30,622 test triples (random_kg moves the few evaluation triples whose
entities never occur in training to train). ``prepare`` builds it and its
graph views once; every measurement then runs in a fresh subprocess that
loads them, builds WGE (64 quaternions, K = 2), resets the peak resident set
size (``/proc/self/clear_refs``, Linux) and reports "peak +MB": the peak
during the measured step minus the resident size just before it.

- ``eval``: filtered ranking (both directions, the encoder run once, under
  ``torch.no_grad``) of the first ``--queries / 2`` test triples, scored
  ``--chunk`` queries at a time (the ``eval_batch_size`` of training).
- ``train``: one training step on ``--batch-size`` queries (encoder over the
  whole graph, 1-N loss at every layer, backward, clipping, Adam), after one
  warm-up step (which allocates Adam's state and the cached adjacencies);
  also the encoder alone (forward and backward of the sum of its outputs).
- ``encoder``: the encoder alone (forward and backward of the sum of its
  outputs, after one such warm-up step) in each of ``--processes`` processes
  (gloo), ``--encoder replicated`` (every process the whole encoder) or
  ``sharded`` (:mod:`torch_wge.training.sharded_encoder`): "peak +MB" of
  every process, and, exactly, the megabytes of the tensors autograd saved
  for the backward pass (the activations, parameters not counted) and of
  the layers' outputs, which the decoders read whole in every process.
- ``encoders``: ``encoder`` with 1 process, and with 2 and 4 replicated and sharded, each in a
  fresh subprocess; ``--json`` writes them all as a record.

Example::

    python benchmarks/bench_distributed_memory.py prepare --graph /tmp/codex-l-synthetic.pt
    python benchmarks/bench_distributed_memory.py all --graph /tmp/codex-l-synthetic.pt
    python benchmarks/bench_distributed_memory.py encoder --graph /tmp/codex-l-synthetic.pt --processes 2 --encoder sharded
    python benchmarks/bench_distributed_memory.py encoders --graph /tmp/codex-l-synthetic.pt --json record.json
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import torch
from rss import peak_rss_mb, reset_peak_rss

SIZES = dict(num_entities=77_951, num_relations=69, train=551_193, valid=30_622, test=30_622)


def prepare(path: str) -> None:
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


def _model(data):
    from torch_wge.nn import WGE

    torch.manual_seed(0)
    model = WGE(int(data.num_nodes), int(data.num_relations), hidden_channels=64, num_layers=2)
    return model, model.graph_inputs(data)


def measure_eval(path: str, chunk: int, queries: int) -> dict:
    from torch_wge.evaluation import LinkPredictionEvaluator
    from torch_wge.training import split_triples
    from torch_wge.training.inference import evaluate_model

    data = torch.load(path, weights_only=False)
    model, inputs = _model(data)
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
    from torch_wge.training import TrainingQueries, split_triples
    from torch_wge.training.distributed import BatchLoss

    data = torch.load(path, weights_only=False)
    model, inputs = _model(data)
    queries = TrainingQueries(split_triples(data, "train"), int(data.num_nodes), int(data.num_relations))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    module = BatchLoss(model, inputs).train()
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


def _encoder_process(rank: int, path: str, processes: int, mode: str, port: int, out: str) -> None:
    import torch.distributed as dist

    from torch_wge.training.sharded_encoder import shard_encoder

    torch.set_num_threads(1)
    data = torch.load(path, weights_only=False)
    model, inputs = _model(data)
    if processes > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=processes)
        if mode == "sharded":
            shard_encoder(model, dist.new_group())

    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def keep(tensor):  # counts each storage autograd saves once
        if tensor.layout == torch.strided and tensor.untyped_storage().data_ptr() not in parameters:
            saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    def step():
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
            encoded = model.encode(**inputs)
        outputs = sum(t.numel() * t.element_size() for t in encoded.entities[1:] + encoded.relations[1:])
        sum(x.sum() for x in encoded.entities + encoded.relations).backward()
        model.zero_grad(set_to_none=True)
        return outputs

    step()  # warm-up: the normalised adjacencies (and a sharded encoder's rows of them) are kept
    saved.clear()
    before = reset_peak_rss()
    tic = time.perf_counter()
    outputs = step()
    record = {
        "rank": rank,
        "peak_plus_mb": round(peak_rss_mb() - before),
        "saved_mb": round(sum(saved.values()) / 2**20),
        "layer_outputs_mb": round(outputs / 2**20),
        "seconds": round(time.perf_counter() - tic, 1),
    }
    with open(f"{out}/rank{rank}.json", "w") as file:
        json.dump(record, file)


def measure_encoder(path: str, processes: int, mode: str) -> dict:
    import socket
    import tempfile

    import torch.multiprocessing as mp

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        mp.start_processes(
            _encoder_process, args=(path, processes, mode, port, out), nprocs=processes, start_method="spawn"
        )
        ranks = [json.loads(Path(out, f"rank{rank}.json").read_text()) for rank in range(processes)]
    return {
        "what": "encoder",
        "processes": processes,
        "encoder": mode if processes > 1 else "one process",
        **{key: [r[key] for r in ranks] for key in ("peak_plus_mb", "saved_mb", "layer_outputs_mb", "seconds")},
    }


def measure_encoders(path: str, record: Optional[str]) -> None:
    """``encoder`` with 1 process, then 2 and 4 replicated and sharded, each in a fresh subprocess;
    one line each, and a record of them all."""

    from bench_speed import write_record

    setups = [(1, "replicated")] + [(processes, mode) for processes in (2, 4) for mode in ("replicated", "sharded")]
    results = []
    for processes, mode in setups:
        command = [sys.executable, __file__, "encoder", "--graph", path, "--processes", str(processes)]
        out = subprocess.run(command + ["--encoder", mode], check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    if record:
        write_record(record, "bench_distributed_memory encoders", {"graph": SIZES, "results": results})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["prepare", "eval", "train", "encoder", "encoders", "all"])
    parser.add_argument("--graph", required=True, help="file of the prepared graph")
    parser.add_argument("--chunk", type=int, default=1024, help="eval: queries scored at once")
    parser.add_argument("--queries", type=int, default=2 * SIZES["test"], help="eval: queries ranked")
    parser.add_argument("--batch-size", type=int, default=1024, help="train: queries per batch")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--processes", type=int, default=1, help="encoder: processes (1 thread each)")
    parser.add_argument("--encoder", choices=["replicated", "sharded"], default="sharded", help="encoder: mode")
    parser.add_argument("--json", help="encoders: write the record here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.command == "prepare":
        prepare(args.graph)
    elif args.command == "eval":
        print(json.dumps(measure_eval(args.graph, args.chunk, args.queries)))
    elif args.command == "train":
        print(json.dumps(measure_train(args.graph, args.batch_size)))
    elif args.command == "encoder":
        print(json.dumps(measure_encoder(args.graph, args.processes, args.encoder)))
    elif args.command == "encoders":
        measure_encoders(args.graph, args.json)
    else:
        runs = [["eval", "--chunk", str(c), "--queries", str(q)] for q in (4_000, 16_000) for c in (256, 4_000)]
        runs += [["eval", "--chunk", "1024"], ["train"]]
        for run in runs:
            out = subprocess.run(
                [sys.executable, __file__, *run, "--graph", args.graph, "--threads", str(args.threads)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            print(out.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
