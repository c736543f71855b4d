"""AdamW's step on a WGE model's parameters, by implementation: the multi-tensor one (torch's default),
the fused one (what ``torch-wge train`` uses on the CPU) and the loop over parameters.

Every implementation steps the same parameters from the same gradients; each step is timed after
``--warmup`` steps, and the largest difference of the parameters from the multi-tensor step's after
all steps is reported (rounding: the implementations order their operations differently).

Example::

    python benchmarks/bench_optimizer.py --entities 14541 --relations 237 --hidden-channels 64 \\
        --threads 1 2 --json benchmarks/records/speed/optimizer/fb15k-237-large.json
"""

import argparse
import statistics
import time
from typing import Dict, List

import torch
from bench_speed import write_record

from torch_wge.nn import WGE

IMPLEMENTATIONS = {"foreach": dict(foreach=True), "fused": dict(fused=True), "for-loop": dict(foreach=False)}


def time_steps(model: WGE, implementation: str, steps: int, warmup: int, seed: int):
    """Milliseconds of each counted step, and the parameters after all steps."""
    parameters = [p.detach().clone().requires_grad_() for p in model.parameters()]
    generator = torch.Generator().manual_seed(seed)
    for parameter in parameters:
        parameter.grad = torch.randn(parameter.shape, generator=generator)
    optimizer = torch.optim.AdamW(parameters, lr=0.01, weight_decay=0.0, **IMPLEMENTATIONS[implementation])
    milliseconds = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.step()
        if step >= warmup:
            milliseconds.append(1000 * (time.perf_counter() - start))
    return milliseconds, [parameter.detach() for parameter in parameters]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=14541, help="(default: FB15k-237's 14541)")
    parser.add_argument("--relations", type=int, default=237, help="(default: FB15k-237's 237)")
    parser.add_argument("--hidden-channels", type=int, default=64, help="quaternions per embedding (default: 64)")
    parser.add_argument("--num-layers", type=int, default=2, help="encoder layers K (default: 2)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch threads (default: 1 2)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps (default: 30)")
    parser.add_argument("--warmup", type=int, default=3, help="steps not timed first (default: 3)")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()

    model = WGE(args.entities, args.relations, hidden_channels=args.hidden_channels, num_layers=args.num_layers)
    numbers = sum(p.numel() for p in model.parameters())
    print(
        f"WGE({args.entities}, {args.relations}, hidden_channels={args.hidden_channels}, "
        f"num_layers={args.num_layers}): {numbers:,} parameters in {len(list(model.parameters()))} tensors"
    )
    results: Dict[str, Dict[str, Dict]] = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        rows: Dict[str, Dict] = {}
        reference: List[torch.Tensor] = []
        for implementation in IMPLEMENTATIONS:
            milliseconds, after = time_steps(model, implementation, args.steps, args.warmup, seed=0)
            reference = reference or after
            difference = max((a - b).abs().max().item() for a, b in zip(after, reference))
            rows[implementation] = {"median_ms": statistics.median(milliseconds), "ms": milliseconds}
            rows[implementation]["max_difference_from_foreach"] = difference
            print(
                f"{threads} thread(s), {implementation:8s}: {statistics.median(milliseconds):7.2f} ms a step "
                f"(median of {args.steps}), parameters within {difference:.1e} of foreach's"
            )
        results[str(threads)] = rows
    if args.json:
        record = {
            "model": {
                "entities": args.entities,
                "relations": args.relations,
                "hidden_channels": args.hidden_channels,
                "num_layers": args.num_layers,
                "parameters": numbers,
            },
            "steps": args.steps,
            "warmup": args.warmup,
            "by_threads": results,
        }
        write_record(args.json, "bench_optimizer", record)


if __name__ == "__main__":
    main()
