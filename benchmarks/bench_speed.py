"""Training and evaluation speed and peak memory of torch_wge, side by side
with PyKEEN's QuatE and a naive WGE, against the matmul floor of the machine.

Configurations, each measured in its own subprocess (so that peak memory
figures do not mix):

- ``wge``: torch_wge WGE with the paper's settings (64 quaternions, K = 2,
  batch 1024, beta = 0.2), trained with :class:`torch_wge.training.Trainer`;
- ``quate``: the same with ``num_layers=0`` (plain QuatE, 1-N);
- ``naive``: the deliberately naive WGE of ``tests/naive_wge.py`` (dense
  adjacency, dense targets, autograd BCE, one query at a time in evaluation);
- ``pykeen``: PyKEEN's ``QuatE`` (64 quaternions = 256 real dims), LCWA
  (1-N) training with BCE-with-logits and label smoothing 0.1, filtered
  ``RankBasedEvaluator`` (run with ``--pykeen-python``, by default this
  interpreter when it imports pykeen);
- ``matmul``: GFLOP/s of each dense matmul shape one epoch and one test
  evaluation multiply (:func:`epoch_matmuls`, :func:`eval_matmuls`), in the
  layout and dtype the step uses, and of a big float32 square product;
- ``wge@baseline``, ``quate@baseline`` (with ``--baseline DIR``): ``wge`` and
  ``quate`` again with the ``torch_wge`` of another checkout (an earlier
  commit, e.g. made with ``git worktree add DIR COMMIT``), measured in the
  same run, so that the speed-up over it is a ratio of one machine and one
  session. Each baseline configuration runs right before its current one,
  and with ``--profile`` the baseline's batches are profiled too
  (``profile@baseline``: the kernels a step launches before and after).

Reported per configuration: seconds per training epoch (median of
``--epochs-timed`` epochs after one warm-up epoch; with ``--max-batches n``
each timed unit is ``n`` batches, scaled to a full epoch), seconds per full
filtered evaluation of valid and of test (both directions, encoder included,
median of ``--eval-repeats`` after a warm-up), and peak memory: the resident
set high-water mark (VmHWM) of the subprocess on CPU, which includes the
Python interpreter, torch and the dataset, or ``torch.cuda.max_memory_allocated``
on CUDA.

The floor is the time the dense matmuls of one epoch take at the GFLOP/s
measured for their shapes: the sum of count x 2mkp / rate over the products
``[m, k] @ [k, p]`` of the epoch (:func:`epoch_matmuls`). Per batch of ``b``
queries and per layer, the fused 1-N loss scores chunks of ``c`` rows (as
``one_to_n_loss`` chooses them: ``CHUNK_ELEMENTS // N``, at least
``MIN_CHUNK_ROWS``, at most ``b``), ``[c, C] @ [C, N]``, and forms its two
gradient products; per batch and encoder layer, each view multiplies its
``n`` rows by its C x C matrix, ``[n, C] @ [C, C]``, and forms two backward
products (n = N for the entity view, N + 2R for the relation view). The
epoch is reported against the float32 floor (every matmul in float32) and,
where the device multiplies bfloat16 natively (or with ``--precision bf16``),
against the bf16 floor: the loss's and the encoder's matmuls in bfloat16, as
precision ``auto`` (the default) or ``bf16`` runs them.
Sparse products, element-wise work and the optimiser are left out of the
floor, and with ``--candidates`` it still scores every batch against all N.

Example::

    python benchmarks/bench_speed.py --dataset codex-s --threads 2 --json out.json
"""

import argparse
import collections
import dataclasses
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from common import (
    DEFAULT_DATA,
    VECTOR_EXTENSIONS,
    Clock,
    cpu_model,
    git_state,
    kernel_launches,
    kernel_operators,
    limit_batches,
    measured_code,
    memory_report,
    naive_wge,
    prepare_root,
    rss_mb,
)

CONFIGS = ("matmul", "wge", "quate", "naive", "pykeen")
LABELS = {
    "wge": "torch_wge WGE",
    "quate": "torch_wge QuatE",
    "naive": "naive WGE",
    "pykeen": "PyKEEN QuatE",
    "wge@baseline": "baseline WGE",
    "quate@baseline": "baseline QuatE",
}
#: The model each configuration trains: the work its floor is the time of.
MODEL_OF = {
    "wge": "wge",
    "wge@baseline": "wge",
    "naive": "wge",
    "quate": "quate",
    "quate@baseline": "quate",
    "pykeen": "quate",
}
#: Short names of the matmul dtypes.
SHORT = {"float32": "f32", "bfloat16": "bf16"}


def setup_torch(args):
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    return torch


def load(args):
    from torch_wge.training import TrainConfig, load_data

    # a torch_wge from before the precision setting takes no such argument and computes in float32
    has_precision = any(field.name == "precision" for field in dataclasses.fields(TrainConfig))
    if not has_precision and args.precision != "float32":
        raise SystemExit(
            f"this torch_wge has no precision setting (it computes in float32): --precision float32, "
            f"not {args.precision!r}"
        )
    config = TrainConfig(
        dataset=args.dataset,
        root=args.root,
        recipe="paper",  # the speed tables' optimiser and 1-N BCE unless --objective is given
        device=args.device,
        num_layers=args.layers,
        batch_size=args.batch_size,
        hidden_channels=args.hidden_channels,
        eval_batch_size=args.eval_batch_size,
        **({"precision": args.precision} if has_precision else {}),
        **({"objective": args.objective} if args.objective else {}),
        **({"candidates": args.candidates} if args.candidates else {}),
    )
    tic = time.perf_counter()
    _, data = load_data(config)
    return config, data, time.perf_counter() - tic


# --------------------------------------------------------- the dense matmuls of a step
class Matmul(NamedTuple):
    """``[m, k] @ [k, n]`` in ``dtype``, run ``count`` times. ``layout`` says how each factor is
    stored: ``"n"`` contiguous, ``"t"`` the transposed view of a contiguous tensor (left, right:
    ``"nt"`` is ``a @ b.t()``)."""

    name: str
    m: int
    k: int
    n: int
    count: int
    dtype: str  # "float32" or "bfloat16"
    layout: str

    @property
    def shape(self) -> str:
        return f"[{self.m},{self.k}]@[{self.k},{self.n}]"

    @property
    def key(self) -> str:
        """What its rate depends on: shape, layout and dtype (not name or count)."""
        return f"{self.shape} {self.layout} {self.dtype}"

    @property
    def flops(self) -> float:
        """``count x 2mkn``."""
        return 2.0 * self.m * self.k * self.n * self.count


#: The big float32 product whose rate the epoch's FLOPs are also divided by.
SQUARE = Matmul("square", 2048, 2048, 2048, 1, "float32", "nn")


def chunk_rows(batch: int, num_entities: int, device: str = "cpu") -> int:
    """Rows of queries the fused 1-N loss scores together in a batch of ``batch``
    (``one_to_n_loss``): ``max(MIN_CHUNK_ROWS, elements // N)``, at most the batch, with
    ``elements`` ``CHUNK_ELEMENTS`` on the CPU, ``GPU_CHUNK_ELEMENTS`` elsewhere."""
    from torch_wge.nn.decoders.loss import CHUNK_ELEMENTS, GPU_CHUNK_ELEMENTS, MIN_CHUNK_ROWS

    elements = CHUNK_ELEMENTS if device.split(":")[0] == "cpu" else GPU_CHUNK_ELEMENTS
    return max(1, min(batch, max(MIN_CHUNK_ROWS, elements // max(num_entities, 1))))


def _matmul_list(counts: Dict[tuple, int]) -> List[Matmul]:
    return [Matmul(name, m, k, n, count, dtype, layout) for (name, m, k, n, dtype, layout), count in counts.items()]


def epoch_matmuls(
    batch_sizes: Sequence[int],
    num_entities: int,
    num_relations: int,
    channels: int,
    num_layers: int,
    dtype: str = "float32",
    device: str = "cpu",
) -> List[Matmul]:
    """The dense matmuls of a training epoch of batches of ``batch_sizes`` queries. Per batch of
    ``b`` queries, for each of the K + 1 layers and each chunk of ``c`` rows (:func:`chunk_rows`,
    the last one shorter), the fused loss multiplies in ``dtype``:
    ``score_fwd`` ``[c, C] @ X^T [C, N]``, ``score_grad_q`` ``G [c, N] @ X [N, C]`` and
    ``score_grad_x`` ``G^T [N, c] @ q [c, C]``. Per batch, each of the K encoder layers multiplies
    in ``dtype`` for each view (``ef``: n = N rows, ``rf``: n = N + 2R) ``conv_*_fwd``
    ``[n, C] @ M [C, C]``, ``conv_*_grad_x`` ``[n, C] @ M^T [C, C]`` and ``conv_*_grad_w``
    ``[C, n] @ [n, C]``."""
    n, c, k1 = num_entities, channels, num_layers + 1
    counts: Dict[tuple, int] = collections.Counter()
    for b, batches in collections.Counter(batch_sizes).items():
        rows = chunk_rows(b, n, device)
        for size, chunks in ((rows, b // rows), (b % rows, 1)):
            if not size or not chunks:
                continue
            for name, shape, layout in (
                ("score_fwd", (size, c, n), "nt"),
                ("score_grad_q", (size, n, c), "nn"),
                ("score_grad_x", (n, size, c), "tn"),
            ):
                counts[(name, *shape, dtype, layout)] += batches * chunks * k1
        if num_layers:
            for view, rows_ in (("ef", n), ("rf", n + 2 * num_relations)):
                for name, shape, layout in (
                    (f"conv_{view}_fwd", (rows_, c, c), "nn"),
                    (f"conv_{view}_grad_x", (rows_, c, c), "nt"),
                    (f"conv_{view}_grad_w", (c, rows_, c), "tn"),
                ):
                    counts[(name, *shape, dtype, layout)] += batches * num_layers
    return _matmul_list(counts)


def eval_matmuls(
    num_queries: int, batch_size: int, num_entities: int, num_relations: int, channels: int, num_layers: int
) -> List[Matmul]:
    """The dense matmuls of a filtered evaluation of ``num_queries`` queries, all float32: the
    encoder's forward products once, then per batch of ``b`` queries (the last one shorter) the
    weighted queries of all layers against all layers' entities side by side,
    ``eval_score`` ``[b, (K + 1) C] @ [(K + 1) C, N]``."""
    n, c, k1 = num_entities, channels, num_layers + 1
    counts: Dict[tuple, int] = collections.Counter()
    if num_layers:
        for view, rows in (("ef", n), ("rf", n + 2 * num_relations)):
            counts[(f"conv_{view}_fwd", rows, c, c, "float32", "nn")] += num_layers
    for size, batches in ((batch_size, num_queries // batch_size), (num_queries % batch_size, 1)):
        if size and batches:
            counts[("eval_score", size, k1 * c, n, "float32", "nt")] += batches
    return _matmul_list(counts)


def floor_seconds(matmuls: Sequence[Matmul], gflops: Dict[str, float]) -> float:
    """Seconds the ``matmuls`` take at the rates ``gflops`` (GFLOP/s by :attr:`Matmul.key`):
    the sum of ``count x 2mkn / rate``."""
    return sum(mm.flops / (gflops[mm.key] * 1e9) for mm in matmuls)


def flop_counts(epoch: Sequence[Matmul], evaluation: Sequence[Matmul]) -> Dict[str, float]:
    """FLOPs of an epoch's scoring and encoder matmuls, of the epoch and of an evaluation."""
    scoring = sum(mm.flops for mm in epoch if mm.name.startswith("score"))
    total = sum(mm.flops for mm in epoch)
    return {
        "scoring": scoring,
        "encoder": total - scoring,
        "epoch": total,
        "eval": sum(mm.flops for mm in evaluation),
    }


# ------------------------------------------------------------------- workers
def worker_matmul(args) -> Dict[str, Any]:
    """GFLOP/s of each matmul of ``--root``, a JSON list of ``[m, k, n, dtype, layout]``: the
    median of up to 50 products after two warm-up ones, each factor stored as the layout says."""
    torch = setup_torch(args)
    clock = Clock(args.device)

    def factor(rows: int, cols: int, stored: str, dtype: str):
        if stored == "t":  # the transposed view of a contiguous [cols, rows]
            return torch.randn(cols, rows, device=args.device, dtype=getattr(torch, dtype)).t()
        return torch.randn(rows, cols, device=args.device, dtype=getattr(torch, dtype))

    gflops = {}
    for m, k, n, dtype, layout in json.loads(args.root):
        a, b = factor(m, k, layout[0], dtype), factor(k, n, layout[1], dtype)
        flops = 2.0 * m * k * n
        for _ in range(2):
            a @ b
        times = []
        for _ in range(max(3, min(50, int(2e10 / flops)))):
            tic = clock()
            a @ b
            times.append(clock() - tic)
        gflops[Matmul("", m, k, n, 1, dtype, layout).key] = flops / statistics.median(times) / 1e9
    return {"gflops": gflops, "threads": torch.get_num_threads()}


def compile_parts(trainer, args) -> None:
    """With ``--compile-encoder MODE`` and ``--compile-queries MODE``, ``torch.compile`` of the
    model's encoder pass and of its decoders' queries (``mode`` ``"default"``,
    ``"reduce-overhead"``: CUDA graphs on a GPU, or ``"max-autotune"``): an experiment with the parts
    of a step whose shapes do not change between steps, ahead of any such option in torch_wge. The
    first (warm-up) epoch then includes the compilation. Compiled dropout draws other numbers than
    eager dropout, so only the encoder (which has none) computes what the eager step does."""
    import torch

    for name, mode in (("encode", args.compile_encoder), ("queries", args.compile_queries)):
        if not mode:
            continue
        compiled = torch.compile(getattr(trainer.model, name), mode=mode)
        if name == "encode":  # a step's first part: CUDA-graph trees may reuse the last step's memory

            def encode(*inputs, compiled=compiled, **kwargs):
                torch.compiler.cudagraph_mark_step_begin()
                return compiled(*inputs, **kwargs)

            compiled = encode
        setattr(trainer.model, name, compiled)


def worker_torch_wge(args) -> Dict[str, Any]:
    torch = setup_torch(args)
    from torch_wge.training import Trainer

    clock = Clock(args.device)
    config, data, load_s = load(args)
    rss_data = rss_mb()
    tmp = tempfile.mkdtemp(prefix="bench_speed_")
    try:
        trainer = Trainer(config, data, out_dir=tmp, progress=False)
        compile_parts(trainer, args)
        num_queries = len(trainer.queries)
        num_batches = trainer.queries.num_batches(config.batch_size)
        per_unit = limit_batches(trainer, args.max_batches, config.batch_size)
        times = []
        for i in range(1 + args.epochs_timed):
            tic = clock()
            loss = trainer.train_epoch()
            if i:
                times.append(clock() - tic)
        train_peak = memory_report(args.device)
        # what a CLI epoch adds to the training step: its last.pt, written atomically
        from torch_wge.training import save_checkpoint

        saves = []
        for _ in range(3):
            tic = clock()
            save_checkpoint(trainer.state(), Path(tmp) / "last.pt")
            saves.append(clock() - tic)
        # a partial epoch is scaled by queries (the last batch of a full epoch is smaller)
        epoch_s = statistics.median(times) * num_queries / len(trainer.queries)
        evals: Dict[str, List[float]] = {"valid": [], "test": []}
        trainer.evaluate("valid")  # warm-up (moves filters to the device, first-call costs)
        for _ in range(args.eval_repeats):
            for split in evals:
                tic = clock()
                results = trainer.evaluate(split)
                evals[split].append(clock() - tic)
        mrr = results["both.mrr"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "epoch_s": epoch_s,
        "epoch_times": times,
        "checkpoint_s": statistics.median(saves),
        "batches_timed": per_unit,
        "num_batches": num_batches,
        "num_queries": num_queries,
        "extrapolated": per_unit < num_batches,
        "precision": getattr(trainer, "precision", getattr(config, "precision", "float32")),  # as resolved
        "last_loss": loss,
        "valid_eval_s": statistics.median(evals["valid"]),
        "test_eval_s": statistics.median(evals["test"]),
        "eval_times": evals,
        "test_mrr_after_timing": mrr,
        "load_s": load_s,
        "rss_after_load_mb": rss_data,
        "train_peak": train_peak,
        **memory_report(args.device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def dtype_conversions(prof) -> List[Dict[str, Any]]:
    """The ``copy_`` operators of a profile whose source and destination dtypes differ, grouped by
    shapes and dtypes, largest first: each group's share of the profile's self CPU time."""
    total = sum(event.self_cpu_time_total for event in prof.events()) or 1.0
    groups: Dict[Tuple[str, str], float] = {}
    for event in prof.events():
        dtypes = event.input_dtypes[:2]
        if event.name == "aten::copy_" and len(dtypes) == 2 and dtypes[0] != dtypes[1]:
            key = (" <- ".join(dtypes), str(event.input_shapes[0]))
            groups[key] = groups.get(key, 0.0) + event.self_cpu_time_total
    ranked = sorted(groups.items(), key=lambda item: -item[1])
    return [{"dtypes": dtypes, "shapes": shapes, "share": time / total} for (dtypes, shapes), time in ranked]


def worker_profile(args) -> Dict[str, Any]:
    """torch.profiler over ``--profile`` training batches of torch_wge WGE (after one warm-up batch)."""
    setup_torch(args)
    from torch.profiler import ProfilerActivity, profile

    from torch_wge.training import Trainer

    config, data, _ = load(args)
    tmp = tempfile.mkdtemp(prefix="bench_speed_")
    try:
        trainer = Trainer(config, data, out_dir=tmp, progress=False)
        compile_parts(trainer, args)
        limit_batches(trainer, args.profile, config.batch_size)
        trainer.train_epoch()  # warm-up
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
        with profile(activities=activities, record_shapes=True) as prof:  # shapes and dtypes
            tic = time.perf_counter()
            trainer.train_epoch()
            wall = time.perf_counter() - tic
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    averages = prof.key_averages(group_by_input_shape=args.profile_shapes)
    print(
        averages.table(
            sort_by="self_cpu_time_total",
            row_limit=args.profile_rows,
            max_name_column_width=40,
            max_shapes_column_width=70,
        ),
        file=sys.stderr,
    )
    rows = sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)[: args.profile_rows]
    # kernels launched by the CUDA runtime or driver API (0 on the CPU): what a step waits on when
    # the GPU is faster than Python
    launches = kernel_launches(prof)
    operators = kernel_operators(prof)
    print(
        f"{launches / args.profile:.0f} kernel launches, {operators / args.profile:.0f} kernel operators a batch",
        file=sys.stderr,
    )
    conversions = dtype_conversions(prof)
    print(
        f"dtype conversions: {100 * sum(c['share'] for c in conversions):.1f} % of the self CPU time; "
        + "; ".join(f"{c['dtypes']} {c['shapes']} {100 * c['share']:.2f} %" for c in conversions[:5]),
        file=sys.stderr,
    )
    return {
        "batches": args.profile,
        "wall_s": wall,
        "dtype_conversions": conversions,
        "kernel_launches_per_batch": launches / args.profile,
        "kernel_operators_per_batch": operators / args.profile,
        "top": [
            {
                "name": e.key,
                "calls": e.count,
                "self_cpu_s": e.self_cpu_time_total / 1e6,
                "cpu_total_s": e.cpu_time_total / 1e6,
                **({"shapes": str(e.input_shapes)} if args.profile_shapes else {}),
            }
            for e in rows
        ],
    }


def worker_naive(args) -> Dict[str, Any]:
    torch = setup_torch(args)
    naive = naive_wge()
    NaiveWGE, answer_sets, evaluate, train_epoch = naive.NaiveWGE, naive.answer_sets, naive.evaluate, naive.train_epoch

    from torch_wge.training.data import split_triples

    clock = Clock(args.device)
    config, data, load_s = load(args)
    num_entities, num_relations = int(data.num_nodes), int(data.num_relations)
    model = NaiveWGE(
        num_entities,
        num_relations,
        data.ef_edge_index,
        data.rf_edge_index,
        channels=4 * args.hidden_channels,  # the naive model counts real numbers
        num_layers=args.layers,
    ).to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    train = split_triples(data, "train").tolist()
    answers = answer_sets(train, num_relations)
    num_batches = -(-len(answers) // args.batch_size)
    max_batches = args.max_batches or None
    times = []
    for i in range(1 + args.epochs_timed):
        tic = clock()
        loss, batches = train_epoch(model, optimizer, answers, args.batch_size, seed=i, max_batches=max_batches)
        if i:
            times.append(clock() - tic)
    timed_queries = min(batches * args.batch_size, len(answers))
    epoch_s = statistics.median(times) * len(answers) / timed_queries
    train_peak = memory_report(args.device)
    known = answer_sets(split_triples(data, "all").tolist(), num_relations)
    evals = {}
    for split in ("valid", "test"):
        # the encoder runs once per evaluation; only the per-query ranking loop is scaled to all queries
        triples = split_triples(data, split).tolist()
        limit = min(args.naive_eval_triples or len(triples), len(triples))
        tic = clock()
        model.eval()
        with torch.no_grad():
            states = model.encode()
        encode_s = clock() - tic
        tic = clock()
        ranks = evaluate(model, triples, known, num_relations, max_triples=limit, states=states)
        evals[split] = encode_s + (clock() - tic) * len(triples) / limit
        evals[split + "_queries_timed"] = len(ranks)
        evals[split + "_encode_s"] = encode_s
    return {
        "epoch_s": epoch_s,
        "epoch_times": times,
        "batches_timed": batches,
        "num_batches": num_batches,
        "num_queries": len(answers),
        "extrapolated": batches < num_batches,
        "last_loss": loss,
        "valid_eval_s": evals["valid"],
        "test_eval_s": evals["test"],
        "eval_queries_timed": {s: evals[s + "_queries_timed"] for s in ("valid", "test")},
        "eval_encode_s": {s: evals[s + "_encode_s"] for s in ("valid", "test")},
        "eval_extrapolated": any(
            evals[s + "_queries_timed"] < 2 * int(data[m].sum())
            for s, m in (("valid", "val_mask"), ("test", "test_mask"))
        ),
        "load_s": load_s,
        "train_peak": train_peak,
        **memory_report(args.device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def worker_pykeen(args) -> Dict[str, Any]:
    torch = setup_torch(args)
    import pykeen
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.models import QuatE
    from pykeen.training import LCWATrainingLoop
    from pykeen.training.callbacks import TrainingCallback
    from pykeen.triples import CoreTriplesFactory

    from torch_wge.training.data import split_triples

    clock = Clock(args.device)
    _, data, load_s = load(args)
    num_entities, num_relations = int(data.num_nodes), int(data.num_relations)
    train, valid, test = (split_triples(data, s) for s in ("train", "valid", "test"))
    factory = CoreTriplesFactory.create(train, num_entities, num_relations, create_inverse_triples=True)
    model = QuatE(
        triples_factory=factory,
        embedding_dim=args.hidden_channels,  # PyKEEN counts quaternions too: stored as (dim, 4)
        loss="bcewithlogits",
        entity_regularizer=None,  # torch_wge's QuatE has no regulariser
        relation_regularizer=None,
        random_seed=0,
    ).to(args.device)
    loop = LCWATrainingLoop(
        model=model,
        triples_factory=factory,
        optimizer="adam",
        optimizer_kwargs=dict(lr=5e-4),
        automatic_memory_optimization=False,
    )

    class Stop(Exception):
        pass

    class Stamps(TrainingCallback):
        def __init__(self):
            super().__init__()
            self.batches: List[float] = []
            self.epochs: List[float] = []

        def post_batch(self, epoch: int, batch, **kwargs) -> None:
            self.batches.append(clock())
            if args.max_batches and len(self.batches) >= (1 + args.epochs_timed) * args.max_batches:
                raise Stop

        def post_epoch(self, epoch: int, epoch_loss: float, **kwargs) -> None:
            self.epochs.append(clock())

    # no gradient clipping: in pykeen 1.11.1 train(gradient_clipping_max_norm=...) fails with "Callback was
    # never initialized"; torch_wge clips (0.5), so PyKEEN's epoch does slightly less work here
    stamps = Stamps()
    tmp = tempfile.mkdtemp(prefix="bench_pykeen_")
    try:
        start = clock()
        try:
            loop.train(
                triples_factory=factory,
                num_epochs=1 + args.epochs_timed,
                batch_size=args.batch_size,
                label_smoothing=0.1,
                use_tqdm=False,
                use_tqdm_batch=False,
                callbacks=[stamps],
                checkpoint_directory=tmp,
            )
        except Stop:
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.max_batches:
        # PyKEEN's LCWA instances are the distinct (head, relation) pairs with inverses, as torch_wge's queries
        # (checked in full-epoch mode, where the batches are counted)
        from torch_wge.training import TrainingQueries

        num_queries = len(TrainingQueries(train, num_entities, num_relations))
        num_batches = -(-num_queries // args.batch_size)
        n = args.max_batches
        marks = [start] + stamps.batches
        units = [marks[(i + 1) * n] - marks[i * n] for i in range(1, 1 + args.epochs_timed)]
        epoch_s = statistics.median(units) * num_queries / (n * args.batch_size)
        per_unit = n
    else:
        num_batches = len(stamps.batches) // (1 + args.epochs_timed)
        num_queries = None
        marks = [start] + stamps.epochs
        units = [marks[i + 1] - marks[i] for i in range(1, len(marks) - 1)]
        epoch_s = statistics.median(units)
        per_unit = num_batches
    train_peak = memory_report(args.device)
    evaluator = RankBasedEvaluator(filtered=True)
    eval_times = []
    for i in range(1 + args.eval_repeats_pykeen):
        tic = clock()
        result = evaluator.evaluate(
            model, test, batch_size=args.eval_batch_size, use_tqdm=False, additional_filter_triples=[train, valid]
        )
        if i:
            eval_times.append(clock() - tic)
    return {
        "epoch_s": epoch_s,
        "epoch_times": units,
        "batches_timed": per_unit,
        "num_batches": num_batches,
        "num_queries": num_queries,
        "extrapolated": bool(args.max_batches),
        "test_eval_s": statistics.median(eval_times),
        "eval_times": eval_times,
        "test_mrr_after_timing": float(result.get_metric("both.realistic.inverse_harmonic_mean_rank")),
        "load_s": load_s,
        "train_peak": train_peak,
        **memory_report(args.device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "pykeen": pykeen.get_version(),
    }


WORKERS = {
    "matmul": worker_matmul,
    "wge": worker_torch_wge,
    "quate": worker_torch_wge,
    "naive": worker_naive,
    "pykeen": worker_pykeen,
    "profile": worker_profile,
}


# -------------------------------------------------------------------- parent
def pykeen_python(args) -> Optional[str]:
    python = args.pykeen_python or sys.executable
    ok = (
        Path(python).exists()
        and subprocess.run(
            [python, "-c", "import pykeen, torch_wge"], capture_output=True, env=worker_env(args)
        ).returncode
        == 0
    )
    return python if ok else None


def worker_env(args, pythonpath: Optional[str] = None) -> Dict[str, str]:
    env = dict(os.environ)
    if pythonpath:  # the torch_wge of another checkout
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # importing pykeen creates its data folder under $HOME unless told otherwise
    env.setdefault("PYSTOW_HOME", os.path.join(args.tmp, "pystow"))
    env.setdefault("PYKEEN_HOME", os.path.join(args.tmp, "pystow", "pykeen"))
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    return env


def run_worker(
    args, kind: str, python: str = sys.executable, extra: Optional[List[str]] = None, pythonpath: Optional[str] = None
) -> Dict[str, Any]:
    cmd = [
        python,
        str(Path(__file__).resolve()),
        "--worker",
        kind,
        "--dataset",
        args.dataset,
        "--root",
        args.root,
        "--device",
        args.device,
        "--threads",
        str(args.threads),
        "--epochs-timed",
        str(args.epochs_timed),
        "--eval-repeats",
        str(args.eval_repeats),
        "--eval-repeats-pykeen",
        str(args.eval_repeats_pykeen),
        "--batch-size",
        str(args.batch_size),
        "--eval-batch-size",
        str(args.eval_batch_size),
        "--hidden-channels",
        str(args.hidden_channels),
        "--precision",
        args.precision,
        "--compile-encoder",
        args.compile_encoder,
        "--compile-queries",
        args.compile_queries,
        "--layers",
        str(0 if kind in ("quate", "pykeen") else args.layers),
        "--tmp",
        args.tmp,
    ]
    cmd += ["--objective", args.objective] if args.objective else []
    cmd += ["--candidates", str(args.candidates)] if args.candidates else []
    cmd += extra or []
    label = f"{kind}@baseline" if pythonpath else kind
    print(f"[{label}] running ...", file=sys.stderr, flush=True)
    tic = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(args, pythonpath))
    if proc.returncode != 0:
        print(proc.stderr[-4000:], file=sys.stderr)
        return {
            "error": f"worker {kind} failed with exit code {proc.returncode}: "
            f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}"
        }
    if kind == "profile":
        print(proc.stderr, file=sys.stderr)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"[{label}] done in {time.perf_counter() - tic:.1f} s", file=sys.stderr, flush=True)
    return out


def matmul_table(plans: Dict[str, List[Matmul]], gflops: Dict[str, float]) -> List[str]:
    """Lines of an epoch's matmuls, one per product, with its runs and GFLOP and, for each plan of
    ``plans`` (scoring dtype to :func:`epoch_matmuls`), its rate and seconds; then the totals."""
    names = [f"{mm.name} {mm.shape}" for mm in plans["float32"]]
    width = max(len(name) for name in names + ["matmul"])
    head = f"  {'matmul':<{width}} {'dtype':<8} {'runs':>7} {'GFLOP':>8}"
    head += "".join(f" {SHORT[dtype] + ' GFLOP/s':>13} {SHORT[dtype] + ' s':>8}" for dtype in plans)
    lines = [head]
    for name, same in zip(names, zip(*plans.values())):  # the same product in each plan
        dtypes = "/".join(dict.fromkeys(SHORT[mm.dtype] for mm in same))
        line = f"  {name:<{width}} {dtypes:<8} {same[0].count:>7,} {same[0].flops / 1e9:>8.1f}"
        line += "".join(f" {gflops[mm.key]:>13.0f} {floor_seconds([mm], gflops):>8.3f}" for mm in same)
        lines.append(line)
    total = f"  {'total':<{width}} {'':<8} {'':>7} {sum(mm.flops for mm in plans['float32']) / 1e9:>8.1f}"
    total += "".join(f" {'':>13} {floor_seconds(plan, gflops):>8.3f}" for plan in plans.values())
    return lines + [total]


def fmt(value, spec: str = ".3f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="codex-s", help="dataset name (default: codex-s)")
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA),
        help="folder holding <dataset>/{train,valid,test}.txt (default: ../shared/datasets)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument(
        "--epochs-timed",
        type=int,
        default=3,
        help="timed epochs (or --max-batches units) after one warm-up (default: 3)",
    )
    parser.add_argument(
        "--max-batches",
        type=int,
        default=0,
        help="time this many batches per unit and scale to a full epoch (default: full epochs)",
    )
    parser.add_argument(
        "--naive-max-batches",
        type=int,
        default=None,
        help="--max-batches for the naive baseline (default: same as --max-batches)",
    )
    parser.add_argument(
        "--naive-epochs-timed",
        type=int,
        default=None,
        help="--epochs-timed for the naive baseline (default: same as --epochs-timed)",
    )
    parser.add_argument(
        "--pykeen-max-batches", type=int, default=None, help="--max-batches for PyKEEN (default: same as --max-batches)"
    )
    parser.add_argument("--eval-repeats", type=int, default=3, help="timed evaluations per split (default: 3)")
    parser.add_argument(
        "--eval-repeats-pykeen", type=int, default=2, help="timed PyKEEN test evaluations after a warm-up (default: 2)"
    )
    parser.add_argument(
        "--naive-eval-triples",
        type=int,
        default=250,
        help="naive evaluation ranks the head and tail queries of this many triples per split and "
        "extrapolates linearly; 0 for all (default: 250, i.e. 500 queries)",
    )
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--eval-batch-size", type=int, default=1024)
    parser.add_argument("--hidden-channels", type=int, default=64, help="quaternions per embedding")
    parser.add_argument(
        "--compile-encoder",
        default="",
        help="torch.compile the WGE encoder pass with this mode (default, reduce-overhead, max-autotune); "
        "an experiment, see compile_parts (default: eager)",
    )
    parser.add_argument(
        "--compile-queries",
        default="",
        help="torch.compile the decoders' queries with this mode, as --compile-encoder (default: eager)",
    )
    parser.add_argument(
        "--precision",
        default="auto",
        help="TrainConfig.precision of torch_wge: auto, float32, tf32 or bf16; a torch_wge from before the "
        "setting runs float32 only (default: auto, the library's)",
    )
    parser.add_argument("--layers", type=int, default=2, help="WGE encoder layers K (default: 2)")
    parser.add_argument("--objective", help="TrainConfig.objective of torch_wge: bce or softmax (default: bce)")
    parser.add_argument(
        "--candidates", type=int, help="TrainConfig.candidates: sampled entities per batch (softmax only)"
    )
    parser.add_argument("--skip-pykeen", action="store_true")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--only", nargs="+", choices=CONFIGS, help="run only these configurations")
    parser.add_argument(
        "--profile", type=int, default=0, help="also profile this many WGE training batches with torch.profiler"
    )
    parser.add_argument("--profile-rows", type=int, default=25)
    parser.add_argument("--profile-shapes", action="store_true", help="group the profile by input shapes")
    parser.add_argument(
        "--pykeen-python", default=None, help="interpreter with pykeen and torch_wge installed (default: this one)"
    )
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="DIR",
        help="another checkout whose torch_wge also runs wge and quate, for a same-run speed-up",
    )
    parser.add_argument("--json", default=None, help="write all results to this JSON file")
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        import warnings

        warnings.simplefilter("ignore")
        print(json.dumps(WORKERS[args.worker](args)))
        return

    import warnings

    warnings.simplefilter("ignore")
    import torch

    from torch_wge.training import TrainConfig, TrainingQueries, load_data, split_triples
    from torch_wge.training.precision import PRECISIONS, resolve_precision
    from torch_wge.utils.devices import BF16_CPU_FLAGS, cpu_flags, has_native_bf16

    if args.precision not in PRECISIONS:
        parser.error(f"--precision must be one of {', '.join(PRECISIONS)}, got {args.precision!r}")
    command = "python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:])
    wanted = set(args.only or CONFIGS)
    if args.skip_pykeen:
        wanted.discard("pykeen")
    if args.skip_naive:
        wanted.discard("naive")
    with tempfile.TemporaryDirectory(prefix="bench_speed_root_") as tmp:
        args.tmp = tmp
        root = Path(tmp) / "data"
        prepare_root(Path(args.data_dir), args.dataset, root)
        args.root = str(root)
        _, data = load_data(TrainConfig(dataset=args.dataset, root=args.root))  # processes the raw files once
        n, r = int(data.num_nodes), int(data.num_relations)
        train_queries = TrainingQueries(split_triples(data, "train"), n, r)
        queries = len(train_queries)
        batch_sizes = [len(index) for index in train_queries.batch_indices(args.batch_size, shuffle=False)]
        batches = len(batch_sizes)
        splits = {
            s: int(data[m].sum()) for s, m in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask"))
        }
        # the dense matmuls of an epoch and of a test evaluation, in float32 and, where bfloat16 is
        # native or asked for, in bfloat16
        precision = resolve_precision(args.precision, args.device)
        step_dtype = str(PRECISIONS[precision].loss_matmul_dtype or torch.float32).replace("torch.", "")
        native_bf16 = has_native_bf16(args.device)
        step_dtypes = ["float32"] + (["bfloat16"] if native_bf16 or step_dtype == "bfloat16" else [])
        c, models = 4 * args.hidden_channels, {"wge": args.layers, "quate": 0}
        plans = {
            model: {dtype: epoch_matmuls(batch_sizes, n, r, c, layers, dtype, args.device) for dtype in step_dtypes}
            for model, layers in models.items()
        }
        evals = {
            model: eval_matmuls(2 * splits["test"], args.eval_batch_size, n, r, c, layers)
            for model, layers in models.items()
        }
        everything = [SQUARE] + [
            mm for model in models for plan in [*plans[model].values(), evals[model]] for mm in plan
        ]
        shapes = list({mm.key: [mm.m, mm.k, mm.n, mm.dtype, mm.layout] for mm in everything}.values())
        sizes = {"num_entities": n, "num_relations": r, **splits, "train_queries": queries, "batches": batches}
        info = {
            "dataset": args.dataset,
            "command": command,
            "date": datetime.date.today().isoformat(),
            "machine": {
                "cpu": cpu_model(),
                "cpu_flags": sorted(flag for flag in VECTOR_EXTENSIONS if flag in cpu_flags()),
                "bf16_cpu_flags": sorted(cpu_flags() & BF16_CPU_FLAGS),  # empty: neither
                "native_bf16": native_bf16,  # of the device
                "cpus": os.cpu_count(),
                "device": args.device,
                "threads": args.threads or torch.get_num_threads(),
                "torch": torch.__version__,
                "python": platform.python_version(),
            },
            "git": git_state(),
            **measured_code(),
            **({"baseline_git": git_state(Path(args.baseline))} if args.baseline else {}),
            "sizes": sizes,
            "precision": {"asked": args.precision, "resolved": precision, "loss_matmul_dtype": step_dtype},
        }
        print(
            f"{args.dataset}: {n} entities, {r} relations, {splits['train']} train / {splits['valid']} valid / "
            f"{splits['test']} test triples, {queries} training queries ({batches} batches of "
            f"{args.batch_size}); {info['machine']['cpu']}, {info['machine']['threads']} threads, "
            f"torch {torch.__version__}, device {args.device}",
            file=sys.stderr,
        )

        results: Dict[str, Any] = {}
        if "matmul" in wanted:
            saved_root, args.root = args.root, json.dumps(shapes)
            results["matmul"] = run_worker(args, "matmul")
            args.root = saved_root
        for kind in ("wge", "quate", "naive"):
            if kind in wanted:
                limit = (
                    args.naive_max_batches
                    if kind == "naive" and args.naive_max_batches is not None
                    else args.max_batches
                )
                extra = ["--max-batches", str(limit)]
                if kind == "naive":
                    extra += ["--naive-eval-triples", str(args.naive_eval_triples)]
                    if args.naive_epochs_timed is not None:
                        extra += ["--epochs-timed", str(args.naive_epochs_timed)]
                if args.baseline and kind != "naive":
                    results[f"{kind}@baseline"] = run_worker(args, kind, extra=extra, pythonpath=args.baseline)
                results[kind] = run_worker(args, kind, extra=extra)
        if "pykeen" in wanted:
            python = pykeen_python(args)
            if python is None:
                tried = args.pykeen_python or sys.executable
                msg = (
                    f"pykeen is not importable (tried {tried}); skipped. "
                    "Install it in a separate venv, see benchmarks/README.md"
                )
                print(msg, file=sys.stderr)
                results["pykeen"] = {"skipped": msg}
            else:
                limit = args.pykeen_max_batches if args.pykeen_max_batches is not None else args.max_batches
                results["pykeen"] = run_worker(args, "pykeen", python=python, extra=["--max-batches", str(limit)])
        if args.profile:
            extra = ["--profile", str(args.profile), "--profile-rows", str(args.profile_rows)]
            extra += ["--profile-shapes"] if args.profile_shapes else []
            if args.baseline:  # the kernels a step launches, before and after, in one run
                results["profile@baseline"] = run_worker(args, "profile", extra=extra, pythonpath=args.baseline)
            results["profile"] = run_worker(args, "profile", extra=extra)

    # ------------------------------------------------------------ analysis
    eval_q = {s: 2 * splits[s] for s in ("valid", "test")}
    flops = {model: flop_counts(plans[model]["float32"], evals[model]) for model in models}
    floors: Dict[str, Dict[str, float]] = {}
    matmuls: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
    g = results.get("matmul", {}).get("gflops")
    if g:
        for model in models:
            floors[model] = {
                **{f"epoch_floor_{dtype}_s": floor_seconds(plans[model][dtype], g) for dtype in step_dtypes},
                "epoch_floor_square_s": flops[model]["epoch"] / (g[SQUARE.key] * 1e9),
                "test_eval_floor_s": floor_seconds(evals[model], g),
            }
            matmuls[model] = {
                dtype: [
                    {**mm._asdict(), "gflop": mm.flops / 1e9, "gflops": g[mm.key], "s": floor_seconds([mm], g)}
                    for mm in plan
                ]
                for dtype, plan in [*plans[model].items(), ("test_eval", evals[model])]
            }
    ratios: Dict[str, Any] = {}

    def get(kind: str, key: str):
        value = results.get(kind, {}).get(key)
        return value if isinstance(value, (int, float)) else None

    for slow, fast in (("pykeen", "quate"), ("naive", "wge"), ("wge@baseline", "wge"), ("quate@baseline", "quate")):
        for key in ("epoch_s", "test_eval_s", "valid_eval_s", "peak_rss_mb"):
            a, b = get(slow, key), get(fast, key)
            if a is not None and b is not None and b > 0:
                ratios[f"{LABELS[slow]} / {LABELS[fast]} {key}"] = a / b

    # ---------------------------------------------------------------- table
    lines = [
        f"{args.dataset}: N={n}, R={r}, {queries} training queries, {batches} batches of {args.batch_size}, "
        f"{eval_q['valid']} valid / {eval_q['test']} test queries; {info['machine']['cpu']}, "
        f"{info['machine']['threads']} threads, torch {torch.__version__}, {args.device}",
        f"bfloat16: {'native' if native_bf16 else 'not native'} on {args.device} (CPU flags: "
        f"{', '.join(info['machine']['bf16_cpu_flags']) or 'neither avx512_bf16 nor amx_bf16'}); "
        f"--precision {args.precision} is {precision} here: "
        + (
            "every matmul in float32"
            if step_dtype == "float32"
            else f"the loss's and the encoder's matmuls in {step_dtype}, the rest float32"
        ),
    ]
    if g:
        lines.append(
            f"FLOPs per epoch: WGE {flops['wge']['epoch'] / 1e9:.1f} G (scoring "
            f"{flops['wge']['scoring'] / 1e9:.1f} G, encoder {flops['wge']['encoder'] / 1e9:.1f} G), "
            f"QuatE {flops['quate']['epoch'] / 1e9:.1f} G; test evaluation: WGE "
            f"{flops['wge']['eval'] / 1e9:.1f} G, QuatE {flops['quate']['eval'] / 1e9:.1f} G; "
            f"{SQUARE.shape} float32 {g[SQUARE.key]:.0f} GFLOP/s"
        )
        rows = chunk_rows(args.batch_size, n, args.device)
        for model in [m for m in models if any(MODEL_OF.get(kind) == m for kind in results)] or list(models):
            lines += ["", f"{LABELS[model]} epoch floor (batches of {args.batch_size}: loss chunks of {rows} rows):"]
            lines += matmul_table(plans[model], g)
    mem_key = "peak_cuda_mb" if args.device.startswith("cuda") else "peak_rss_mb"
    floor_heads = "".join(f" {SHORT[dtype] + ' floor':>10} {'x ' + SHORT[dtype]:>7}" for dtype in step_dtypes)
    header = (
        f"{'configuration':<17} {'epoch s':>9}{floor_heads} {'valid s':>8} {'test s':>8} "
        f"{'test floor':>10} {'peak MB':>8}  notes"
    )
    lines += ["", header, "-" * len(header)]
    for kind in ("wge@baseline", "wge", "quate@baseline", "quate", "naive", "pykeen"):
        res = results.get(kind)
        if res is None:
            continue
        if "error" in res or "skipped" in res:
            lines.append(f"{LABELS[kind]:<17} {res.get('error') or res.get('skipped')}")
            continue
        floor = floors.get(MODEL_OF[kind], {})
        notes = [f"precision {res['precision']}"] if res.get("precision") else []
        if res.get("extrapolated"):
            notes.append(f"epoch from {res['batches_timed']} of {res['num_batches']} batches")
        if res.get("eval_extrapolated"):
            notes.append(f"eval from {res['eval_queries_timed']['test']} queries")
        if kind == "pykeen":
            notes.append(f"pykeen {res.get('pykeen')}")
        if res.get("checkpoint_s") is not None:
            notes.append(
                f"last.pt write {res['checkpoint_s']:.3f} s ({res['checkpoint_s'] / res['epoch_s']:.1%} of an epoch)"
            )
        columns = ""
        for dtype in step_dtypes:
            seconds = floor.get(f"epoch_floor_{dtype}_s")
            res[f"x_floor_{dtype}"] = res["epoch_s"] / seconds if seconds else None
            columns += f" {fmt(seconds):>10} {fmt(res[f'x_floor_{dtype}'], '.2f'):>7}"
        lines.append(
            f"{LABELS[kind]:<17} {fmt(res['epoch_s']):>9}{columns} {fmt(res.get('valid_eval_s')):>8} "
            f"{fmt(res.get('test_eval_s')):>8} {fmt(floor.get('test_eval_floor_s')):>10} "
            f"{fmt(res.get(mem_key), '.0f'):>8}  {'; '.join(notes)}"
        )
    if ratios:
        lines += ["", "ratios (slower / faster):"]
        lines += [f"  {name}: {value:.1f}x" for name, value in ratios.items()]
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    **info,
                    "results": results,
                    "flops": flops,
                    "floors": floors,
                    "matmuls": matmuls,
                    "ratios": ratios,
                    "table": lines,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
