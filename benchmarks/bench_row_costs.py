"""What one row of a view costs the sharded encoder: its quaternion products against its sparse sums.

On a real dataset's graph views, with one CPU thread, times what each of 2 processes computes of a
layer of the sharded encoder (both views' sparse sums ``Â H`` and quaternion products of its rows,
forward and backward, with the gradients of the input and of the weight as in training), its
rows shared out by equal counts and by the estimated costs of ``torch_wge.training.sharded_encoder``
(``PRODUCT_COST_PER_CHANNEL``): the most frequent entities come first, so equal counts give the
first process more stored entries. The four parts are timed in turn, ``--repeats`` times, and the
medians reported, with the slowest part over the mean of the two (1 when balanced).

Example::

    python benchmarks/bench_row_costs.py --dataset fb15k-237 --recipe large \\
        --json benchmarks/records/speed/fb15k-237/row-costs.json
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import torch
from bench_speed import prepare_root, record_header

HERE = Path(__file__).resolve().parent


def layer_work(adj_rows: torch.Tensor, lin: torch.nn.Module, inputs: torch.Tensor) -> Callable[[], None]:
    """Forward and backward of ``lin(adj_rows @ inputs)``, as a sharded layer computes its rows."""
    from torch_wge.utils.sparse import csr_transpose, matmul_with_transpose

    adj_t = csr_transpose(adj_rows)

    def work() -> None:
        lin.zero_grad(set_to_none=True)
        lin(matmul_with_transpose(adj_rows, adj_t, inputs)).sum().backward()

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fb15k-237", help="a folder name under --data-dir (default: fb15k-237)")
    parser.add_argument("--recipe", default="large", help="the recipe whose model to build (default: large)")
    parser.add_argument(
        "--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"), help="folder of the raw datasets"
    )
    parser.add_argument("--repeats", type=int, default=15, help="timings of each part (default: 15)")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from torch_wge.training import TrainConfig, build_model, load_data
    from torch_wge.training.sharded_encoder import PRODUCT_COST_PER_CHANNEL, RowShares
    from torch_wge.utils.sparse import csr_rows

    with tempfile.TemporaryDirectory(prefix="bench_row_costs_") as tmp:
        root = Path(tmp) / "data"
        prepare_root(Path(args.data_dir), args.dataset, root)
        config = TrainConfig(dataset=args.dataset, recipe=args.recipe, root=str(root), device="cpu")
        _, data = load_data(config, log=False)
    model = build_model(config, data)
    inputs = model.graph_inputs(data)
    conv = model.encoder.convs[0]
    channels = model.encoder.channels
    views = {"ef": (inputs["ef_edge_index"], conv.entity_conv), "rf": (inputs["rf_edge_index"], conv.relation_conv)}
    # each of 2 processes' layer: both views' rows of its shares, by counts and by costs
    n = data.num_nodes
    ef, rf = inputs["ef_edge_index"], inputs["rf_edge_index"]
    product = PRODUCT_COST_PER_CHANNEL * channels
    stored = rf.crow_indices().diff().to(torch.float64)
    entity_costs = 2 * product + ef.crow_indices().diff().to(torch.float64) + stored[:n]
    relation_costs = product + stored[n:]
    features = {name: torch.randn(adj.size(0), channels, requires_grad=True) for name, (adj, _) in views.items()}
    works, sizes = {}, {}
    for kind in ("counts", "costs"):
        for rank in range(2):
            entities = RowShares(n, 2, rank, entity_costs if kind == "costs" else None)
            relations = RowShares(rf.size(0) - n, 2, rank, relation_costs if kind == "costs" else None)
            ranges = {"ef": [entities.own], "rf": [entities.own, (n + relations.own[0], n + relations.own[1])]}
            rows = {name: csr_rows(adj, ranges[name]) for name, (adj, _) in views.items()}
            parts = [layer_work(rows[name], view_conv.lin, features[name]) for name, (_, view_conv) in views.items()]
            works[kind, rank] = lambda parts=parts: [work() for work in parts]
            sizes[kind, rank] = {
                "entities": entities.own_count,
                "relation_nodes": relations.own_count,
                "stored_entries": sum(r._nnz() for r in rows.values()),
            }
    # interleaved, so that a drift of the machine's speed touches every share alike
    times: Dict[Tuple[str, int], List[float]] = {key: [] for key in works}
    for work in works.values():
        work()  # warm-up
    for _ in range(args.repeats):
        for key, work in works.items():
            start = time.perf_counter()
            work()
            times[key].append(1000 * (time.perf_counter() - start))
    medians = {key: statistics.median(values) for key, values in times.items()}
    for kind in ("counts", "costs"):
        parts = [medians[kind, rank] for rank in range(2)]
        described = " / ".join(
            f"{medians[kind, rank]:.1f} ms ({sizes[kind, rank]['entities']} entities, "
            f"{sizes[kind, rank]['stored_entries']} stored entries)"
            for rank in range(2)
        )
        print(
            f"a layer's rows on 2 processes, shares by {kind}: {described}; slowest / mean {max(parts) / statistics.mean(parts):.3f}"
        )

    if args.json:
        from torch_wge.io import write_json

        write_json(
            args.json,
            {
                **record_header("bench_row_costs"),
                "threads": 1,
                "dataset": args.dataset,
                "recipe": args.recipe,
                "channels": channels,
                "product_cost_per_channel": PRODUCT_COST_PER_CHANNEL,
                "repeats": args.repeats,
                "shares_on_2": [{"shares_by": kind, "rank": rank, **sizes[kind, rank]} for kind, rank in sizes],
                "layer_ms": {f"{kind}-{rank}": values for (kind, rank), values in times.items()},
                "median_layer_ms": {f"{kind}-{rank}": value for (kind, rank), value in medians.items()},
            },
        )


if __name__ == "__main__":
    main()
