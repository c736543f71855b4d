"""What one row of a view costs the sharded encoder: its quaternion products against its sparse sums.

On a real dataset's graph views, with one CPU thread, times what each of 2 processes computes of a
layer of the sharded encoder (both views' sparse sums ``Â H`` and quaternion products of its rows,
forward and backward, with the gradients of the input and of the weight as in training), its
rows shared out by equal counts and by the estimated costs of ``torch_wge.training.sharded_encoder``
(``PRODUCT_COST_PER_CHANNEL``). From the two count shares (about equal rows, unequal stored
entries: the most frequent entities come first) it derives the marginal cost of a row's products
and of a stored entry, and their ratio per real channel, which that constant estimates.

Example::

    python benchmarks/bench_row_costs.py --dataset fb15k-237 --recipe large \\
        --json benchmarks/records/speed/fb15k-237/row-costs.json
"""

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch
from bench_speed import cpu_model, git_state, prepare_root

HERE = Path(__file__).resolve().parent


def milliseconds(work: Callable[[], None], repeats: int) -> float:
    """Median milliseconds of ``work`` after one warm-up call."""
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


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
    parser.add_argument("--repeats", type=int, default=5, help="timings of each step (default: 5)")
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
    stored_entries: Dict[str, List[int]] = {}
    shares: Dict[str, List[float]] = {}
    sizes: Dict[str, List[List[int]]] = {}
    for kind in ("counts", "costs"):
        shares[kind], sizes[kind], stored_entries[kind] = [], [], []
        for rank in range(2):
            entities = RowShares(n, 2, rank, entity_costs if kind == "costs" else None)
            relations = RowShares(rf.size(0) - n, 2, rank, relation_costs if kind == "costs" else None)
            ranges: Dict[str, Optional[list]] = {
                "ef": [entities.own],
                "rf": [entities.own, (n + relations.own[0], n + relations.own[1])],
            }
            works = [
                layer_work(csr_rows(adj, ranges[name]), view_conv.lin, features[name])
                for name, (adj, view_conv) in views.items()
            ]
            shares[kind].append(milliseconds(lambda: [work() for work in works], args.repeats))
            sizes[kind].append([entities.own_count, relations.own_count])
            stored_entries[kind].append(sum(csr_rows(adj, ranges[name])._nnz() for name, (adj, _) in views.items()))
        print(
            f"a layer's rows on 2 processes, shares by {kind}: "
            + " / ".join(
                f"{t:.1f} ms ({e} entities, {r} relation nodes)" for t, (e, r) in zip(shares[kind], sizes[kind])
            )
        )

    # the marginal costs, from the two count shares (about equal rows, unequal stored entries)
    (t0, t1), (e0, e1) = shares["counts"], stored_entries["counts"]
    view_rows = [2 * entities + relations for entities, relations in sizes["counts"]]
    us_per_entry = 1e3 * (t0 - t1) / (e0 - e1)
    us_per_row = (1e3 * t1 - us_per_entry * e1) / view_rows[1]
    ratio = us_per_row / us_per_entry / channels
    print(
        f"marginal costs: {us_per_row:.2f} us a row's products, {us_per_entry:.4f} us a stored entry: a row's "
        f"products cost {ratio:.2f} C entries (the shares use {PRODUCT_COST_PER_CHANNEL})"
    )

    if args.json:
        from torch_wge.io import write_json

        write_json(
            args.json,
            {
                "benchmark": "bench_row_costs",
                "command": " ".join(["python", "benchmarks/bench_row_costs.py", *sys.argv[1:]]),
                "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "threads": 1},
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "dataset": args.dataset,
                "recipe": args.recipe,
                "channels": channels,
                "us_per_row_products": us_per_row,
                "us_per_stored_entry_sparse_sums": us_per_entry,
                "product_cost_per_channel_measured": ratio,
                "product_cost_per_channel_used": PRODUCT_COST_PER_CHANNEL,
                "layer_ms_per_process_on_2": shares,
                "share_rows_on_2": sizes,
                "share_stored_entries_on_2": stored_entries,
                "git": git_state(),
            },
        )


if __name__ == "__main__":
    main()
