"""A cost model of one training step of WGE's encoder, replicated or sharded over P processes.

Counts, for a graph of N entities, M = 2R relation nodes and the views' edges, with K layers of
C real channels and both views (the defaults: K = 2, C = 256, i.e. 64 quaternions):

- **compute** (floating-point operations of the encoder's forward and backward in one step):
  the quaternion products, 2 C^2 per node row forward and twice that backward, over the N rows
  of the entity-focused view and the N + M of the relation-focused one; the sparse sums,
  2 C per stored adjacency entry forward and as much backward. The decoders, the batch norms
  and the activations are left out (they are the same replicated or sharded, or small);
- **bytes** each process sends and receives per step for the sharded encoder: per layer, the
  all-gather of the layer's output, (N + M) C float32 numbers of which a process receives
  (P - 1) / P, and backward the reduce-scatter of their gradients, as many (ring algorithms);
- **the break-even bandwidth**: sharding saves (1 - 1/P) of the encoder's compute time and costs
  the bytes' transfer time, so it pays while the bandwidth per process is above
  bytes / (compute x (1 - 1/P) / F), for a device doing F floating-point operations a second;
- the bytes of the gradient all-reduce of the entity and relation embeddings, which
  DistributedDataParallel does in both modes (the encoder reads every row, so the gradient is
  dense): the floor of communication for any data-parallel run;
- the bytes of every layer's whole output, the embeddings included, which every process holds in
  both modes (the decoders read them): what sharding does not divide.

Adjacency entries are 2 x the undirected edges plus a self-loop per node. FB15k-237's and CoDEx-M's
edges are those of the package's views (``torch-wge stats``); CoDEx-L's and the Wikidata5M-sized
graph's are estimated as one undirected edge per training triple in each view (FB15k-237 and
CoDEx-M have 0.78-1.03). Pure arithmetic: nothing is timed.

Example::

    python benchmarks/cost_model.py --json benchmarks/records/cost-model/encoder.json
"""

import argparse
import datetime
import sys
from typing import Dict

GRAPHS: Dict[str, Dict[str, int]] = {
    # entities, relations, training triples, undirected edges of each view
    "FB15k-237": {"entities": 14_541, "relations": 237, "triples": 272_115, "ef_edges": 210_946, "rf_edges": 264_692},
    "CoDEx-M": {"entities": 17_050, "relations": 51, "triples": 185_584, "ef_edges": 179_675, "rf_edges": 191_316},
    "CoDEx-L": {"entities": 77_951, "relations": 69, "triples": 551_193, "ef_edges": 551_193, "rf_edges": 551_193},
    "Wikidata5M-sized": {
        "entities": 4_594_485,
        "relations": 822,
        "triples": 20_614_279,
        "ef_edges": 20_614_279,
        "rf_edges": 20_614_279,
    },
}
DEVICES = {"CPU node, 1 TFLOP/s": 1e12, "GPU, 50 TFLOP/s": 50e12}


def step_costs(graph: Dict[str, int], processes: int, layers: int, channels: int) -> Dict[str, float]:
    """Compute (FLOPs) and communication (bytes) of one encoder step; see the module docstring."""
    n, m = graph["entities"], 2 * graph["relations"]
    entries = 2 * (graph["ef_edges"] + graph["rf_edges"]) + n + (n + m)
    dense = 3 * 2 * channels**2 * (n + (n + m)) * layers
    sparse = 2 * 2 * channels * entries * layers
    share = (processes - 1) / processes
    output_bytes = (n + m) * channels * 4
    return {
        "encoder_flops": float(dense + sparse),
        "encoder_flops_per_process_sharded": (dense + sparse) / processes,
        "gathered_bytes_per_process": share * output_bytes * layers,
        "reduce_scattered_bytes_per_process": share * output_bytes * layers,
        "embedding_gradient_all_reduce_bytes_per_process": 2 * share * output_bytes,
        "layer_outputs_bytes_per_process": (layers + 1) * output_bytes,
    }


def break_even_bandwidth(costs: Dict[str, float], processes: int, flops_per_second: float) -> float:
    """Bytes per second per process below which the sharded encoder is slower than the replicated one."""
    saved_seconds = costs["encoder_flops"] * (1 - 1 / processes) / flops_per_second
    moved = costs["gathered_bytes_per_process"] + costs["reduce_scattered_bytes_per_process"]
    return moved / saved_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[8, 64], help="P (default: 8 64)")
    parser.add_argument("--layers", type=int, default=2, help="K (default: 2)")
    parser.add_argument("--channels", type=int, default=256, help="real channels C (default: 256)")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()

    rows = []
    print(
        "| graph | P | encoder TFLOP per step (per process) | GB gathered + reduce-scattered per process "
        "| GB embedding-gradient all-reduce | GB of layer outputs per process | break-even GB/s: "
        + " | ".join(DEVICES)
        + " |"
    )
    print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(DEVICES))
    for name, graph in GRAPHS.items():
        for processes in args.processes:
            costs = step_costs(graph, processes, args.layers, args.channels)
            bandwidths = {device: break_even_bandwidth(costs, processes, rate) for device, rate in DEVICES.items()}
            rows.append({"graph": name, "processes": processes, **costs, "break_even_bytes_per_second": bandwidths})
            moved = costs["gathered_bytes_per_process"] + costs["reduce_scattered_bytes_per_process"]
            print(
                f"| {name} | {processes} | {costs['encoder_flops'] / 1e12:.3f} "
                f"({costs['encoder_flops_per_process_sharded'] / 1e12:.4f}) | {moved / 1e9:.3f} "
                f"| {costs['embedding_gradient_all_reduce_bytes_per_process'] / 1e9:.3f} "
                f"| {costs['layer_outputs_bytes_per_process'] / 1e9:.2f} | "
                + " | ".join(f"{value / 1e9:.1f}" for value in bandwidths.values())
                + " |"
            )
    if args.json:
        from torch_wge.io import write_json

        write_json(
            args.json,
            {
                "benchmark": "cost_model",
                "command": " ".join(["python", "benchmarks/cost_model.py", *sys.argv[1:]]),
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "layers": args.layers,
                "channels": args.channels,
                "graphs": GRAPHS,
                "devices_flops_per_second": DEVICES,
                "rows": rows,
            },
        )


if __name__ == "__main__":
    main()
