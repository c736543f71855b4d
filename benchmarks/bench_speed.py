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
- ``matmul``: dense float32 matmul GFLOP/s of the shapes one WGE epoch
  multiplies, and of a big square product;
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

The floor is the time the dense matmuls of one epoch take at the measured
GFLOP/s of their shapes: 1-N scoring of every training query at each of the
K + 1 layers (forward, and the two products of backward: 3 x 2BCN flops) and,
per batch, the encoder's dense products (each QuaternionGCNConv 2nC^2 forward,
x3 with backward, 2 layers x 2 views, n = N or N + 2R). Sparse products,
element-wise work and the optimiser are left out of the floor.

Example::

    python benchmarks/bench_speed.py --dataset codex-s --threads 2 --json out.json
"""

import argparse
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
from typing import Any, Dict, List, Optional

from common import (
    DEFAULT_DATA,
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

    config = TrainConfig(
        dataset=args.dataset,
        root=args.root,
        recipe="paper",  # the speed tables' optimiser and 1-N BCE unless --objective is given
        device=args.device,
        num_layers=args.layers,
        batch_size=args.batch_size,
        hidden_channels=args.hidden_channels,
        eval_batch_size=args.eval_batch_size,
        # named only when not the default, so that a baseline from before the option still runs
        **({"precision": args.precision} if args.precision != "float32" else {}),
        **({"objective": args.objective} if args.objective else {}),
        **({"candidates": args.candidates} if args.candidates else {}),
    )
    tic = time.perf_counter()
    _, data = load_data(config)
    return config, data, time.perf_counter() - tic


# ------------------------------------------------------------------- workers
def worker_matmul(args) -> Dict[str, Any]:
    torch = setup_torch(args)
    clock = Clock(args.device)
    dev = args.device
    n, c, b, r2, k1 = (
        args.num_entities,
        4 * args.hidden_channels,
        args.batch_size,
        2 * args.num_relations,
        args.layers + 1,
    )

    def seconds(fn, flops: float) -> float:
        reps = max(3, min(50, int(2e10 / flops)))
        for _ in range(2):
            fn()
        times = []
        for _ in range(reps):
            tic = clock()
            fn()
            times.append(clock() - tic)
        return statistics.median(times)

    info: Dict[str, float] = {}

    def rate(name: str, m: int, k: int, n_: int) -> float:
        """GFLOP/s of [m, k] @ [k, n_], the right factor stored as is or as the
        transposed view of an [n_, k] tensor (as ``q @ x.t()``); the faster counts."""
        a = torch.randn(m, k, device=dev)
        w = torch.randn(k, n_, device=dev)
        wt = torch.randn(n_, k, device=dev).t()
        flops = 2.0 * m * k * n_
        plain, view = flops / seconds(lambda: a @ w, flops) / 1e9, flops / seconds(lambda: a @ wt, flops) / 1e9
        info[f"{name} (right factor contiguous)"] = plain
        info[f"{name} (right factor a transposed view)"] = view
        return max(plain, view)

    shapes = {
        # 1-N scoring, per layer and batch: q [B, C] @ X^T [C, N] and its two backward products
        "score_fwd [B,C]@[C,N]": (b, c, n),
        "score_grad_q [B,N]@[N,C]": (b, n, c),
        "score_grad_x [C,B]@[B,N]": (c, b, n),
        # evaluation: all layers' weighted queries side by side against all layers' entity matrices
        "eval_score [B,(K+1)C]@[(K+1)C,N]": (b, k1 * c, n),
        # encoder dense part, per conv: x [n, C] @ M [C, C] and its backward
        "conv_fwd [N,C]@[C,C]": (n, c, c),
        "conv_grad_x [N,C]@[C,C]": (n, c, c),
        "conv_grad_w [C,N]@[N,C]": (c, n, c),
        "conv_rf_fwd [N+2R,C]@[C,C]": (n + r2, c, c),
        "square 2048^3": (2048, 2048, 2048),
    }
    gflops = {name: rate(name, *shape) for name, shape in shapes.items()}
    # for information: the K + 1 layers' forward scoring as WGE.layer_scores does it (one bmm against the
    # transposed view of the stacked entity matrices) and as K + 1 separate products
    q = torch.randn(k1, b, c, device=dev)
    xs = [torch.randn(n, c, device=dev) for _ in range(k1)]
    flops = k1 * 2.0 * b * c * n
    info["score_fwd bmm [K+1,B,C]@stack(X).transpose(1,2)"] = (
        flops / seconds(lambda: torch.bmm(q, torch.stack(xs).transpose(1, 2)), flops) / 1e9
    )
    info["score_fwd K+1 x mm [B,C]@X.t()"] = flops / seconds(lambda: [q[i] @ xs[i].t() for i in range(k1)], flops) / 1e9
    return {"gflops": gflops, "info_gflops": info, "threads": torch.get_num_threads()}


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
        with profile(activities=activities, record_shapes=args.profile_shapes) as prof:
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
    return {
        "batches": args.profile,
        "wall_s": wall,
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


def flop_counts(n: int, r: int, c: int, k: int, queries: int, batches: int, eval_queries: int) -> Dict[str, float]:
    conv = 2.0 * n * c * c + 2.0 * (n + 2 * r) * c * c  # one ef and one rf conv, forward
    return {
        "scoring": 3 * (k + 1) * 2.0 * queries * c * n,
        "encoder": batches * 3 * k * conv,
        "epoch": 3 * (k + 1) * 2.0 * queries * c * n + batches * 3 * k * conv,
        "eval": 2.0 * eval_queries * (k + 1) * c * n + k * conv,
    }


def floor_seconds(g: Dict[str, float], n: int, r: int, c: int, k: int, queries: int, batches: int) -> float:
    """Seconds the dense matmuls of one epoch take at the measured GFLOP/s of their shapes."""
    score = 2.0 * queries * c * n * (k + 1)
    conv_ef = 2.0 * n * c * c * k * batches
    conv_rf = 2.0 * (n + 2 * r) * c * c * k * batches
    seconds = score * (
        1 / g["score_fwd [B,C]@[C,N]"] + 1 / g["score_grad_q [B,N]@[N,C]"] + 1 / g["score_grad_x [C,B]@[B,N]"]
    )
    seconds += conv_ef * (
        1 / g["conv_fwd [N,C]@[C,C]"] + 1 / g["conv_grad_x [N,C]@[C,C]"] + 1 / g["conv_grad_w [C,N]@[N,C]"]
    )
    seconds += conv_rf * (
        1 / g["conv_rf_fwd [N+2R,C]@[C,C]"] + 1 / g["conv_grad_x [N,C]@[C,C]"] + 1 / g["conv_grad_w [C,N]@[N,C]"]
    )
    return seconds / 1e9


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
        "--precision", default="float32", help="TrainConfig.precision of torch_wge: float32, tf32 or bf16"
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
        if args.worker == "matmul":
            sizes = json.loads(args.root)
            args.num_entities, args.num_relations = sizes["num_entities"], sizes["num_relations"]
        print(json.dumps(WORKERS[args.worker](args)))
        return

    import warnings

    warnings.simplefilter("ignore")
    import torch

    from torch_wge.training import TrainConfig, TrainingQueries, load_data, split_triples

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
        queries = len(TrainingQueries(split_triples(data, "train"), n, r))
        batches = -(-queries // args.batch_size)
        splits = {
            s: int(data[m].sum()) for s, m in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask"))
        }
        sizes = {"num_entities": n, "num_relations": r, **splits, "train_queries": queries, "batches": batches}
        info = {
            "dataset": args.dataset,
            "command": command,
            "date": datetime.date.today().isoformat(),
            "machine": {
                "cpu": cpu_model(),
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
            saved_root, args.root = args.root, json.dumps({"num_entities": n, "num_relations": r})
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
    c, k = 4 * args.hidden_channels, args.layers
    eval_q = {s: 2 * splits[s] for s in ("valid", "test")}
    flops = {
        "wge": flop_counts(n, r, c, k, queries, batches, eval_q["test"]),
        "quate": flop_counts(n, r, c, 0, queries, batches, eval_q["test"]),
    }
    floors: Dict[str, Dict[str, float]] = {}
    g = results.get("matmul", {}).get("gflops")
    if g:
        for kind, layers in (
            ("wge", k),
            ("quate", 0),
            ("naive", k),
            ("pykeen", 0),
            ("wge@baseline", k),
            ("quate@baseline", 0),
        ):
            floors[kind] = {
                "epoch_floor_s": floor_seconds(g, n, r, c, layers, queries, batches),
                "epoch_floor_square_s": flop_counts(n, r, c, layers, queries, batches, 0)["epoch"]
                / (g["square 2048^3"] * 1e9),
                "test_eval_floor_s": 2.0
                * eval_q["test"]
                * (layers + 1)
                * c
                * n
                / (g["eval_score [B,(K+1)C]@[(K+1)C,N]" if layers else "score_fwd [B,C]@[C,N]"] * 1e9),
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
    ]
    if g:
        lines.append("matmul GFLOP/s (floor rates): " + ", ".join(f"{name} {value:.0f}" for name, value in g.items()))
        lines.append(
            "forward scoring GFLOP/s by layout (all layouts in the JSON): "
            + ", ".join(
                f"{name} {value:.0f}"
                for name, value in results["matmul"].get("info_gflops", {}).items()
                if name.startswith("score_fwd")
            )
        )
        lines.append(
            f"FLOPs per epoch: WGE {flops['wge']['epoch'] / 1e9:.1f} G (scoring "
            f"{flops['wge']['scoring'] / 1e9:.1f} G, encoder {flops['wge']['encoder'] / 1e9:.1f} G), "
            f"QuatE {flops['quate']['epoch'] / 1e9:.1f} G; test evaluation: WGE "
            f"{flops['wge']['eval'] / 1e9:.1f} G, QuatE {flops['quate']['eval'] / 1e9:.1f} G"
        )
    mem_key = "peak_cuda_mb" if args.device.startswith("cuda") else "peak_rss_mb"
    header = (
        f"{'configuration':<17} {'epoch s':>9} {'floor s':>8} {'x floor':>8} {'valid s':>8} {'test s':>8} "
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
        floor = floors.get(kind, {})
        notes = []
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
        x_floor = res["epoch_s"] / floor["epoch_floor_s"] if floor else None
        lines.append(
            f"{LABELS[kind]:<17} {fmt(res['epoch_s']):>9} {fmt(floor.get('epoch_floor_s')):>8} "
            f"{fmt(x_floor, '.2f'):>8} {fmt(res.get('valid_eval_s')):>8} {fmt(res.get('test_eval_s')):>8} "
            f"{fmt(floor.get('test_eval_floor_s')):>10} {fmt(res.get(mem_key), '.0f'):>8}  {'; '.join(notes)}"
        )
        res["x_floor"] = x_floor
    if ratios:
        lines += ["", "ratios (slower / faster):"]
        lines += [f"  {name}: {value:.1f}x" for name, value in ratios.items()]
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {**info, "results": results, "flops": flops, "floors": floors, "ratios": ratios, "table": lines},
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
