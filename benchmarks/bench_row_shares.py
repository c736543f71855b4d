"""How evenly the sharded encoder's row shares split a layer's work, forward and backward apart.

On a real dataset's graph views, with one CPU thread, times what each of ``--processes`` processes
computes of a layer of the sharded encoder (both views' sparse sums ``Â H`` and quaternion products
of its rows; then backward, with the gradients of the input and of the weight, as in training),
its rows shared two ways:

- ``contiguous``: contiguous shares of equal row counts. The most frequent entities come first,
  so the first process gets far more stored adjacency entries than the last;
- ``dealt``: :class:`torch_wge.training.sharded_encoder.RowShares`, the rows dealt out by their
  stored entries (equal counts and about equal entries), what the encoder uses.

The processes synchronise after each pass (the batch norms' all-reduce after the forward sums, the
gather's after backward), so a pass takes as long as its slowest share: the report gives each
pass's medians per process and the slowest over the mean (1 when balanced). The parts are timed
in turn, ``--repeats`` times.

Example::

    python benchmarks/bench_row_shares.py --dataset fb15k-237 --recipe large \\
        --json benchmarks/records/speed/fb15k-237/row-shares.json
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import torch
from bench_speed import prepare_root, write_record

HERE = Path(__file__).resolve().parent
PASSES = ("forward", "backward")


def layer_passes(parts: List[Tuple[torch.Tensor, torch.nn.Module, torch.Tensor]]) -> Callable[[], Tuple[float, float]]:
    """The forward and the backward of ``lin(adj_rows @ inputs)`` for every ``(adj_rows, lin, inputs)``
    of ``parts`` (a process's views of a layer), timed apart, in milliseconds."""
    from torch_wge.utils.sparse import csr_transpose, matmul_with_transpose

    parts_t = [(rows, csr_transpose(rows), lin, inputs) for rows, lin, inputs in parts]

    def timed() -> Tuple[float, float]:
        start = time.perf_counter()
        outputs = [lin(matmul_with_transpose(rows, rows_t, inputs)) for rows, rows_t, lin, inputs in parts_t]
        middle = time.perf_counter()
        torch.stack([output.sum() for output in outputs]).sum().backward()
        stop = time.perf_counter()
        for _, _, lin, inputs in parts_t:
            lin.zero_grad(set_to_none=True)
            inputs.grad = None
        return 1000 * (middle - start), 1000 * (stop - middle)

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fb15k-237", help="a folder name under --data-dir (default: fb15k-237)")
    parser.add_argument("--recipe", default="large", help="the recipe whose model to build (default: large)")
    parser.add_argument(
        "--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"), help="folder of the raw datasets"
    )
    parser.add_argument("--processes", type=int, default=2, help="processes to share the rows among (default: 2)")
    parser.add_argument("--repeats", type=int, default=15, help="timings of each part (default: 15)")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from torch_wge.evaluation.sharding import shard_bounds
    from torch_wge.training import TrainConfig, build_model, load_data
    from torch_wge.training.sharded_encoder import RowShares
    from torch_wge.utils.sparse import csr_rows

    with tempfile.TemporaryDirectory(prefix="bench_row_shares_") as tmp:
        root = Path(tmp) / "data"
        prepare_root(Path(args.data_dir), args.dataset, root)
        config = TrainConfig(dataset=args.dataset, recipe=args.recipe, root=str(root), device="cpu")
        _, data = load_data(config, log=False)
    model = build_model(config, data)
    inputs = model.graph_inputs(data)
    conv = model.encoder.convs[0]
    channels = model.encoder.channels
    n, world = data.num_nodes, args.processes
    ef, rf = inputs["ef_edge_index"], inputs["rf_edge_index"]
    m = rf.size(0) - n
    entries = rf.crow_indices().diff()
    entity_entries, relation_entries = ef.crow_indices().diff() + entries[:n], entries[n:]
    features = {
        "ef": torch.randn(n, channels, requires_grad=True),
        "rf": torch.randn(n + m, channels, requires_grad=True),
    }

    def own_rows(kind: str, rank: int) -> Tuple[torch.Tensor, torch.Tensor]:
        if kind == "contiguous":
            return torch.arange(*shard_bounds(n, rank, world)), torch.arange(*shard_bounds(m, rank, world))
        return RowShares(n, world, rank, entity_entries).own, RowShares(m, world, rank, relation_entries).own

    works, sizes = {}, {}
    for kind in ("contiguous", "dealt"):
        for rank in range(world):
            entities, relations = own_rows(kind, rank)
            rows = {"ef": csr_rows(ef, entities), "rf": csr_rows(rf, torch.cat([entities, n + relations]))}
            lins = {"ef": conv.entity_conv.lin, "rf": conv.relation_conv.lin}
            works[kind, rank] = layer_passes([(rows[view], lins[view], features[view]) for view in rows])
            sizes[kind, rank] = {
                "entities": entities.numel(),
                "relation_nodes": relations.numel(),
                "stored_entries": sum(r._nnz() for r in rows.values()),
            }
    # interleaved, so that a drift of the machine's speed touches every share alike
    times: Dict[Tuple[str, int], List[Tuple[float, float]]] = {key: [] for key in works}
    for work in works.values():
        work()  # warm-up
    for _ in range(args.repeats):
        for key, work in works.items():
            times[key].append(work())
    medians = {
        key: {name: statistics.median(t[i] for t in values) for i, name in enumerate(PASSES)}
        for key, values in times.items()
    }
    imbalance = {}
    for kind in ("contiguous", "dealt"):
        print(f"shares {kind}:")
        for rank in range(world):
            size = sizes[kind, rank]
            print(
                f"  process {rank}: forward {medians[kind, rank]['forward']:6.1f} ms, backward "
                f"{medians[kind, rank]['backward']:6.1f} ms ({size['entities']} entities, "
                f"{size['stored_entries']} stored entries)"
            )
        for name in PASSES:
            parts = [medians[kind, rank][name] for rank in range(world)]
            imbalance[f"{kind}-{name}"] = max(parts) / statistics.mean(parts)
        print(
            f"  slowest / mean: forward {imbalance[kind + '-forward']:.3f}, backward {imbalance[kind + '-backward']:.3f}"
        )

    if args.json:
        write_record(
            args.json,
            "bench_row_shares",
            {
                "threads": 1,
                "dataset": args.dataset,
                "recipe": args.recipe,
                "channels": channels,
                "processes": world,
                "repeats": args.repeats,
                "shares": [{"shares": kind, "rank": rank, **sizes[kind, rank]} for kind, rank in sizes],
                "pass_ms": {f"{kind}-{rank}": values for (kind, rank), values in times.items()},
                "median_pass_ms": {f"{kind}-{rank}": value for (kind, rank), value in medians.items()},
                "slowest_over_mean": imbalance,
            },
        )


if __name__ == "__main__":
    main()
