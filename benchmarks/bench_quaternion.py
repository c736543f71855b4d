"""The quaternion operations of a WGE step, forward and backward, against the same formulas written as
separate tensor operations (what autograd records for them, and what torch_wge ran before): the
time of each and the operators each calls, which on a GPU are kernel launches.

- ``hamilton``: :func:`~torch_wge.utils.quaternion.hamilton_product` of the decoders' queries
  (``--batch-size`` rows) and of a table with one broadcast quaternion vector (``--rows`` rows), against
  its sixteen products and twelve sums;
- ``matrix``: :func:`~torch_wge.utils.quaternion.quaternion_matrix` of a layer's weight, against the
  concatenation of its sixteen signed blocks.

Both sides run alternately in one process, ``--rounds`` times; a side's time is the median over its
rounds of the mean over ``--repeats`` forward and backward passes. Operators are counted with
``torch.profiler`` over one pass: the ATen operators that call no other (views and metadata left out).

Example::

    python benchmarks/bench_quaternion.py --threads 2 --json benchmarks/records/speed/quaternion/ops.json
"""

import argparse
import statistics
import time
from typing import Callable, Dict, List, Sequence, Tuple

import torch
from bench_speed import kernel_operators, write_record
from naive_wge import hamilton as terms_hamilton  # the naive WGE's: the formula's operations as they are
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

from torch_wge.utils.quaternion import hamilton_product, quaternion_matrix


def blocks_matrix(weight: Tensor) -> Tensor:
    """The real matrix of a quaternion weight as the concatenation of its sixteen signed blocks."""
    w_r, w_i, w_j, w_k = weight.unbind(0)
    rows = [[w_r, w_i, w_j, w_k], [-w_i, w_r, w_k, -w_j], [-w_j, -w_k, w_r, w_i], [-w_k, w_j, -w_i, w_r]]
    return torch.cat([torch.cat(row, dim=1) for row in rows], dim=0)


def forward_backward(fn: Callable[..., Tensor], inputs: Sequence[Tensor]) -> Callable[[], None]:
    """One forward and backward pass of ``fn`` on fresh leaves of ``inputs``."""
    leaves = [x.detach().clone().requires_grad_() for x in inputs]

    def run() -> None:
        out = fn(*leaves)
        out.backward(torch.ones_like(out))

    return run


def count_operators(run: Callable[[], None]) -> int:
    """Kernel operators (:func:`bench_speed.kernel_operators`) in one ``run()``."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    return kernel_operators(prof)


def compare(sides: Dict[str, Callable[[], None]], rounds: int, repeats: int) -> Dict[str, Dict]:
    """Each side's microseconds a pass (median over rounds, and every round) and operators a pass."""
    for run in sides.values():  # warm-up
        run()
    microseconds: Dict[str, List[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, run in sides.items():
            start = time.perf_counter()
            for _ in range(repeats):
                run()
            microseconds[name].append(1e6 * (time.perf_counter() - start) / repeats)
    return {
        name: {
            "us": statistics.median(microseconds[name]),
            "us_rounds": microseconds[name],
            "operators": count_operators(run),
        }
        for name, run in sides.items()
    }


def cases(args) -> List[Tuple[str, Dict[str, Callable[[], None]]]]:
    generator = torch.Generator().manual_seed(0)
    c = args.hidden_channels

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator)

    queries = (randn(args.batch_size, c), randn(args.batch_size, c))
    table = (randn(args.rows, c), randn(1, c))
    weight = (randn(4, c // 4, c // 4),)
    return [
        (
            f"hamilton [{args.batch_size}, {c}]",
            {
                "terms": forward_backward(terms_hamilton, queries),
                "torch_wge": forward_backward(hamilton_product, queries),
            },
        ),
        (
            f"hamilton [{args.rows}, {c}] x [1, {c}]",
            {"terms": forward_backward(terms_hamilton, table), "torch_wge": forward_backward(hamilton_product, table)},
        ),
        (
            f"matrix [4, {c // 4}, {c // 4}]",
            {
                "blocks": forward_backward(blocks_matrix, weight),
                "torch_wge": forward_backward(quaternion_matrix, weight),
            },
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=1024, help="queries a batch (default: 1024)")
    parser.add_argument("--rows", type=int, default=14541, help="rows of the broadcast case (default: 14541)")
    parser.add_argument("--hidden-channels", type=int, default=256, help="real channels (default: 256)")
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    results = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name, sides in cases(args):
            result = compare(sides, args.rounds, args.repeats)
            results.setdefault(str(threads), {})[name] = result
            line = ", ".join(f"{side} {r['us']:.0f} us ({r['operators']} operators)" for side, r in result.items())
            print(f"{threads} thread(s), {name}: {line}")
    if args.json:
        fields = {key: getattr(args, key) for key in ("batch_size", "rows", "hidden_channels")}
        write_record(args.json, "quaternion", {**fields, "torch": torch.__version__, "results": results})


if __name__ == "__main__":
    main()
