"""The GPU: what the CUDA path computes and how fast, for a session lent a GPU machine.

``check``, the first command on a lent machine, before changing anything: in one call that fits a
10-minute limit, each step with its own time limit (``--steps NAME ...`` runs some only):

- ``cuda-tests``: the CUDA tests (``--pytest-args``: training, resuming and evaluation equal the CPU's;
  the layers and the loss in bfloat16 with CSR and ``edge_index`` inputs against float64);
- ``fb15k-237-large-eager``: FB15k-237 under the large recipe's step (256 channels, batch 1024,
  sampled softmax over 2000 candidates): seconds per epoch from 40 batches and the kernel launches
  per batch (``bench_speed.py --profile``), eager, and a baseline's epoch beside it when
  ``--baseline`` (default ``data/baseline``) holds another checkout's ``torch_wge``;
- ``fb15k-237-large-compiled``, ``-compiled-queries``: the same with the encoder under
  ``torch.compile(mode="reduce-overhead")`` (CUDA graphs of the encoder, whose shapes never
  change), then the decoders' queries compiled too (their dropout then draws other numbers);
- ``fb15k-237-graph-step``: ``graph-step`` below, eager against the whole step as one CUDA graph,
  with kernel counts;
- ``research-code``: the paper's research code beside torch_wge on CoDEx-S
  (``bench_research_code.py``), when a checkout of it is under ``--research-code`` (default
  ``data/research``);
- ``fb15k-237-large-syncs``: ``syncs`` below;
- ``torchrun-nccl``: ``torchrun`` with the nccl backend, one process on the one GPU, 3 epochs of
  CoDEx-S;
- ``codex-s-example``: the example on CoDEx-S with ``--device cuda`` over 20 epochs.

The datasets are read from ``--data`` (default ``data/datasets``, which git ignores: copy
``codex-s`` and ``fb15k-237`` there and carry ``data/``). On the GPU machine torch and
torch_geometric come with its python3, so the package is imported from the checkout
(``PYTHONPATH``) instead of being installed. Back in ``--out`` (default ``$OUT``): machine.txt,
summary.txt and steps.tar.gz (each step's console output and JSON record: a call returns at most
8 files); the command prints what each step printed last. At their time limits all steps take
about 17 minutes: name ``--steps`` to fit one call.

``graph-step``: a whole WGE training step as one CUDA graph, an experiment toward a GPU step that
is not bound by kernel launches. A CUDA graph replays all of a step's kernels with one launch, but
it needs a step whose shapes never change, while a batch's positive pairs vary in number. Here the
step scores every entity (``candidates`` 0) and the positive pairs are padded to a fixed count with
pairs of weight 0: the step's softmax objective is written here with a weight per pair (the
logits held whole, each pair's cross-entropy weighted and divided by the weights' sum), equal to
:class:`~torch_wge.nn.OneToNLoss`'s ``"softmax"`` on the unpadded pairs. The step (encoder, queries, loss, backward, gradient clipping and AdamW's fused,
capturable update with the learning rate as a tensor) is captured once and replayed for each batch,
whose tensors are copied into the graph's input buffers without waiting. The check (on any device;
captured on CUDA): a few steps of the static step against the trainer's step, dropout off, in
float64, by their losses. Then on CUDA the seconds an epoch takes, eager trainer against graph
replays, over the same ``--max-batches`` batches, with their losses and kernel launches a batch.

``syncs``: where a CUDA training step waits for the GPU: the host synchronisations of
:meth:`torch_wge.training.Trainer.train_epoch`, each with the lines of torch_wge that asked for it
(``torch.cuda.set_sync_debug_mode("warn")``), over ``--batches`` batches after a warm-up epoch.

``loss-chunks``: one training epoch with the fused loss in the CPU's cache-sized chunks
(``CHUNK_ELEMENTS``) against the GPU's (``GPU_CHUNK_ELEMENTS``), alternating, after a warm-up epoch.

``runs``: several ``torch-wge train`` runs (or ``tune`` workers) side by side on the one GPU, each
held to ``MINUTES`` (a run then stops, and is validated and tested as any run that stops early; a
tune worker starts no new trial). A WGE step keeps a GPU busy a fifth of its time or less, so
several runs share one at little cost to each. Each line of ``RUNS_FILE`` is ``NAME COMMAND
ARGS...``, ``COMMAND`` ``train`` or ``tune``: ``torch-wge COMMAND ARGS --out RUNS/NAME`` on CUDA;
names ``NAME@1``, ``NAME@2``, ... share the folder ``RUNS/NAME`` (tune workers of one study). Back
in ``--out``: runs.tar.gz (the run folders without their checkpoints, and each run's console
output), dmon.txt (the GPU's load every 5 s) and summary.txt.

Examples (on the GPU machine, from the repository root, ``data/`` carried)::

    python3 benchmarks/bench_gpu.py check --steps cuda-tests fb15k-237-large-eager fb15k-237-graph-step research-code
    python3 benchmarks/bench_gpu.py graph-step --dataset fb15k-237 --device cuda --json graph-step.json
    python3 benchmarks/bench_gpu.py runs data/runs.txt 5.7 --threads 2
"""

import argparse
import collections
import copy
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Dict, List, Tuple

import torch
import torch.nn.functional as F
from common import (
    DEFAULT_DATA,
    GRAPH_LAUNCHES,
    ROOT,
    Clock,
    kernel_launches,
    limit_batches,
    prepare_root,
    write_record,
)
from torch import Tensor


# ------------------------------------------------------------------ graph-step
class StaticBatch:
    """The device buffers a captured step reads: heads and relations ``[B]``, pairs ``[2, P_max]``
    and their weights ``[P_max]`` (0 for padding); :meth:`load` fills them from a batch without
    waiting."""

    def __init__(self, batch_size: int, max_pairs: int, device: torch.device, dtype: torch.dtype = torch.float32):
        self.batch_size, self.max_pairs = batch_size, max_pairs
        self.flat = torch.zeros(2 * batch_size + 2 * max_pairs, dtype=torch.long, device=device)
        self.heads, self.relations = self.flat[:batch_size], self.flat[batch_size : 2 * batch_size]
        self.pairs = self.flat[2 * batch_size :].view(2, max_pairs)
        self.weights = torch.zeros(max_pairs, device=device, dtype=dtype)

    def load(self, heads: Tensor, relations: Tensor, positives: Tensor) -> None:
        num_pairs = positives.size(1)
        if heads.numel() != self.batch_size or num_pairs > self.max_pairs:
            raise ValueError(
                f"batch of {heads.numel()} queries, {num_pairs} pairs: not {self.batch_size}, <= {self.max_pairs}"
            )
        pairs = torch.zeros(2, self.max_pairs, dtype=torch.long)
        pairs[:, :num_pairs] = positives
        weights = torch.zeros(self.max_pairs, dtype=self.weights.dtype)
        weights[:num_pairs] = 1.0
        flat = torch.cat([heads, relations, pairs.view(-1)])
        pinned = self.flat.device.type == "cuda"
        self.flat.copy_(flat.pin_memory() if pinned else flat, non_blocking=True)
        self.weights.copy_(weights.pin_memory() if pinned else weights, non_blocking=True)


class StaticStep:
    """One training step with static shapes on ``trainer``'s model: forward, backward, clipping and a
    capturable fused AdamW step (its own optimiser, the learning rate a tensor). :meth:`capture`
    records it as a CUDA graph; :meth:`__call__` runs it (replays the graph once captured)."""

    def __init__(self, trainer, batch: StaticBatch):
        self.model, self.graph_inputs, self.batch = trainer.model, trainer.graph_inputs, batch
        self.grad_clip = trainer.config.grad_clip
        self.label_smoothing = trainer.config.label_smoothing
        device = batch.flat.device
        dtype = next(self.model.parameters()).dtype  # a float32 lr would round a float64 model's steps
        self.lr = torch.tensor(trainer.config.lr, device=device, dtype=dtype)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=self.lr,
            weight_decay=trainer.config.weight_decay,
            fused=device.type in ("cpu", "cuda"),
            capturable=device.type == "cuda",
        )
        self.graph = None
        self.loss = torch.zeros((), device=device)

    def _step(self) -> Tensor:
        encoded = self.model.encode(**self.graph_inputs)
        batch = self.batch
        queries = self.model.queries(encoded, batch.heads, batch.relations)  # [K + 1, B, C]
        rows, cols = batch.pairs
        loss = queries.new_zeros(())
        for weight, q, x in zip(self.model.layer_weights, queries, encoded.entities):
            per_pair = F.cross_entropy((q @ x.t())[rows], cols, reduction="none", label_smoothing=self.label_smoothing)
            loss = loss + weight * (batch.weights * per_pair).sum() / batch.weights.sum()
        loss.backward()
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip, foreach=True)
        self.optimizer.step()
        return loss.detach()

    def capture(self, warmup_batches: List[Tuple[Tensor, Tensor, Tensor]]) -> None:
        """Warms up on a side stream with ``warmup_batches`` (real steps), then records the step."""
        self.model.train()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for batch in warmup_batches:
                self.batch.load(*batch)
                self.optimizer.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def __call__(self, heads: Tensor, relations: Tensor, positives: Tensor) -> Tensor:
        self.batch.load(heads, relations, positives)
        if self.graph is not None:
            self.graph.replay()
            return self.loss
        self.optimizer.zero_grad(set_to_none=True)
        return self._step()


def full_batches(trainer, batch_size: int, generator: torch.Generator):
    """The epoch's batches of exactly ``batch_size`` queries, as CPU tensors."""
    return [
        trainer.queries.batch(index)
        for index in trainer.queries.batch_indices(batch_size, generator)
        if index.numel() == batch_size
    ]


def make_trainer(args, root: Path, out: Path, dropout: bool = True):
    from torch_wge.training import TrainConfig, Trainer, load_data

    config = TrainConfig(
        dataset=args.dataset,
        root=str(root),
        recipe="large",
        device=args.device,
        candidates=0,
        batch_size=args.batch_size,
        hidden_channels=args.hidden_channels,
        **({} if dropout else {"dropout": 0.0}),
    )
    _, data = load_data(config, log=False)
    return Trainer(config, data, out_dir=out, progress=False)


def check_step(args, root: Path, tmp: Path, capture: bool) -> Dict[str, object]:
    """In float64, ``args.check_steps`` steps of the static step (captured when ``capture``)
    against the trainer's eager step, dropout off: the largest relative difference of a step's
    loss. Both run two more steps first: the static step's warm-up (before its capture)."""
    trainer = make_trainer(args, root, tmp / "check", dropout=False)
    trainer.model.double()  # in float64, so that Adam's normalised steps do not amplify rounding
    for name, adjacency in trainer.graph_inputs.items():  # the dict the loss module reads
        trainer.graph_inputs[name] = adjacency.double()
    reference = copy.deepcopy(trainer.model.state_dict())
    batches = full_batches(trainer, args.batch_size, torch.Generator().manual_seed(1))[: args.check_steps + 2]
    device = trainer.device

    eager_losses = []
    trainer.model.train()
    for heads, relations, positives in batches:
        loss = trainer.loss_module(*(t.to(device) for t in (heads, relations, positives)))
        trainer.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), trainer.config.grad_clip, foreach=True)
        trainer.optimizer.step()
        eager_losses.append(loss.item())
    eager_losses = eager_losses[2:]

    trainer.model.load_state_dict(reference)
    trainer.optimizer = None
    max_pairs = max(b[2].size(1) for b in batches) + 5  # and some padding in every batch
    static = StaticStep(trainer, StaticBatch(args.batch_size, max_pairs, device, torch.float64))
    if capture:
        static.capture(batches[:2])
    else:
        for batch in batches[:2]:
            static(*batch)
    static_losses = [static(*batch).item() for batch in batches[2:]]
    return {
        "step_loss_rel_diff": max(abs(a - b) / abs(b) for a, b in zip(static_losses, eager_losses)),
        "eager_losses": eager_losses,
        "static_losses": static_losses,
    }


def timing(args, root: Path, tmp: Path) -> Dict[str, object]:
    """Seconds an epoch of ``args.max_batches`` full batches takes, eager trainer and graph replays,
    each over the same batches (dropout on), the median of ``args.epochs_timed`` after a warm-up; then
    one more such epoch under ``torch.profiler``: the kernel launches and CUDA-graph launches a batch."""
    from torch.profiler import ProfilerActivity, profile

    out: Dict[str, object] = {}
    for side in ("eager", "graph"):
        trainer = make_trainer(args, root, tmp / side)
        limit_batches(trainer, args.max_batches, args.batch_size)
        step = None
        if side == "graph":
            batches = full_batches(trainer, args.batch_size, torch.Generator().manual_seed(0))
            max_pairs = max(b[2].size(1) for b in batches)
            trainer.optimizer = None
            step = StaticStep(trainer, StaticBatch(args.batch_size, max_pairs, trainer.device))
            step.capture(batches[:3])

        def run_epoch(trainer=trainer, step=step) -> Tuple[float, int]:
            """One epoch; its mean loss and its batches."""
            if step is None:
                return trainer.train_epoch(), trainer.queries.num_batches(args.batch_size)
            trainer.model.train()
            total = torch.zeros((), device=trainer.device)
            batches = full_batches(trainer, args.batch_size, trainer.generator)
            for batch in batches:
                total += step(*batch)
            return total.item() / len(batches), len(batches)

        times, losses = [], []
        for epoch in range(1 + args.epochs_timed):
            torch.cuda.synchronize()
            tic = time.perf_counter()
            loss, _ = run_epoch()
            torch.cuda.synchronize()
            if epoch:
                times.append(time.perf_counter() - tic)
                losses.append(loss)
        num_batches = trainer.queries.num_batches(args.batch_size)
        out[side] = {"seconds": times, "losses": losses, "batches": num_batches}
        out[f"{side}_epoch_s"] = statistics.median(times) * args.full_batches / num_batches
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            _, batches_run = run_epoch()
            torch.cuda.synchronize()
        out[f"{side}_kernel_launches_per_batch"] = kernel_launches(prof) / batches_run
        out[f"{side}_graph_launches_per_batch"] = kernel_launches(prof, GRAPH_LAUNCHES) / batches_run
    return out


# ------------------------------------------------------------------ syncs
def sync_sites(trainer, batches: int):
    """Runs one epoch of ``batches`` batches under sync-debug mode; returns
    ``{site: count}`` where a site is the innermost torch_wge frames of the call."""
    import torch_wge

    sites: collections.Counter = collections.Counter()
    package = str(Path(torch_wge.__file__).parent)

    def record(message, category, filename, lineno, file=None, line=None):
        frames = [f for f in traceback.extract_stack()[:-1] if f.filename.startswith((package, __file__))]
        if frames and frames[-1].filename.startswith(package):  # not this script's own switching of the mode
            sites[" <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.line}" for f in reversed(frames[-3:]))] += 1

    with warnings.catch_warnings():  # restores warnings.showwarning on the way out
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            trainer.train_epoch()
            torch.cuda.synchronize()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return {site: count / batches for site, count in sites.most_common()}


def syncs(args) -> None:
    """Counts a training step's host synchronisations by the line that asked for each."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py syncs: needs CUDA")
    from torch_wge.training import TrainConfig, Trainer, load_data

    tmp = Path(tempfile.mkdtemp(prefix="bench_gpu_syncs_"))
    try:
        prepare_root(args.data_dir, args.dataset, tmp / "root")
        config = TrainConfig(
            dataset=args.dataset,
            root=str(tmp / "root"),
            recipe="large",
            device="cuda",
            batch_size=args.batch_size,
            hidden_channels=args.hidden_channels,
            candidates=args.candidates,
        )
        _, data = load_data(config)
        trainer = Trainer(config, data, out_dir=tmp / "run", progress=False)
        limit_batches(trainer, args.batches, args.batch_size)
        trainer.train_epoch()  # warm-up: first-call costs and caches
        sites = sync_sites(trainer, args.batches)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = sum(sites.values())
    print(f"{total:.1f} host synchronisations a batch, {len(sites)} sites:")
    for site, count in sites.items():
        print(f"  {count:6.2f}  {site}")
    if args.json:
        fields = {"config": {k: str(v) for k, v in vars(args).items()}, "per_batch": total, "sites": sites}
        write_record(args.json, "gpu_syncs", fields)
        print(f"wrote {args.json}", file=sys.stderr)


def graph_step(args) -> None:
    """The static step's check (any device) and, on CUDA, its epoch against the eager one."""
    import torch

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py graph-step: --device cuda, but CUDA is not available")
    torch.manual_seed(0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_gpu_graph_step_"))
    try:
        prepare_root(args.data_dir, args.dataset, tmp / "root")
        result: Dict[str, object] = {}
        parts = [("check", lambda: check_step(args, tmp / "root", tmp, capture=cuda))]
        parts += [("timing", lambda: timing(args, tmp / "root", tmp))] if cuda else []
        for name, run in parts:  # an experiment: a part that fails is recorded, and the next one runs
            try:
                result[name] = run()
            except Exception as error:  # noqa: BLE001
                result[name] = {"error": f"{type(error).__name__}: {error}"}
            shown = {
                k: v for k, v in result[name].items() if "diff" in k or "_s" in k or "per_batch" in k or k == "error"
            }
            print(f"{name}: {shown}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        write_record(args.json, "gpu_graph_step", {"config": {k: str(v) for k, v in vars(args).items()}, **result})
        print(f"wrote {args.json}", file=sys.stderr)


def loss_chunks(args) -> None:
    """One epoch with the CPU's loss chunks against one with the GPU's, alternating, ``--repeat`` times."""
    import torch_wge.nn.decoders.loss as loss_module
    from torch_wge.training import TrainConfig, Trainer, load_data

    if args.device == "cpu":
        raise SystemExit("bench_gpu.py loss-chunks: the CPU always uses CHUNK_ELEMENTS; name a GPU (cuda, ...)")
    with tempfile.TemporaryDirectory(prefix="bench_gpu_chunks_") as tmp:
        prepare_root(args.data_dir, args.dataset, Path(tmp) / "root")
        config = TrainConfig(
            dataset=args.dataset, root=str(Path(tmp) / "root"), recipe=args.recipe, epochs=10, device=args.device
        )
        _, data = load_data(config)
        clock = Clock(args.device)
        run = Trainer(config, data, Path(tmp) / "run", progress=False)
        run.train_epoch()
        seconds: Dict[str, List[float]] = {}
        sizes = [("cpu-sized", loss_module.CHUNK_ELEMENTS), ("gpu-sized", loss_module.GPU_CHUNK_ELEMENTS)]
        for name, chunk in sizes * args.repeat:
            loss_module.GPU_CHUNK_ELEMENTS = chunk
            start = clock()
            run.train_epoch()
            seconds.setdefault(name, []).append(clock() - start)
            print(f"{name} chunks ({chunk} elements): epoch {seconds[name][-1]:.2f} s", flush=True)
    if args.json:
        write_record(args.json, "gpu_loss_chunks", {"dataset": args.dataset, "epoch_seconds": seconds})


# ------------------------------------------------------------------ check
def gpu_name() -> str:
    """``nvidia-smi``'s line of the GPU (name, memory, driver), or why there is none."""
    query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
    try:
        return subprocess.run(query, capture_output=True, text=True).stdout
    except OSError as error:
        return f"no nvidia-smi: {error}\n"


def check_steps(args) -> List[Tuple[str, int, List[str]]]:
    """``check``'s steps: (name, seconds allowed, command)."""
    python, here = sys.executable, Path(__file__).resolve().parent
    data, out = str(args.data), Path(args.out)
    speed = [python, str(here / "bench_speed.py"), "--dataset", "fb15k-237", "--data-dir", data, "--only", "wge"]
    speed += ["--device", "cuda", "--objective", "softmax", "--candidates", "2000", "--batch-size", "1024"]
    speed += ["--max-batches", "40", "--epochs-timed", "3", "--eval-repeats", "1"]
    baseline = (
        ["--baseline", str(args.baseline)] if (Path(args.baseline) / "torch_wge" / "__init__.py").is_file() else []
    )
    compiled = ["--compile-encoder", "reduce-overhead"]
    steps = [
        ("cuda-tests", 100, [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *shlex.split(args.pytest_args)]),
        (
            "fb15k-237-large-eager",
            150,
            speed
            + baseline
            + ["--profile", "8", "--profile-rows", "15", "--json", str(out / "fb15k-237-large-eager.json")],
        ),
        ("fb15k-237-large-compiled", 150, speed + compiled + ["--json", str(out / "fb15k-237-large-compiled.json")]),
        (
            "fb15k-237-large-compiled-queries",
            150,
            speed
            + compiled
            + ["--compile-queries", "reduce-overhead", "--json", str(out / "fb15k-237-large-compiled-queries.json")],
        ),
        (
            "fb15k-237-graph-step",
            150,
            [python, __file__, "graph-step", "--dataset", "fb15k-237", "--data-dir", data, "--device", "cuda"]
            + ["--json", str(out / "fb15k-237-graph-step.json")],
        ),
    ]
    if (Path(args.research_code) / "main.py").is_file():
        research = [python, str(here / "bench_research_code.py"), "--research-code", str(args.research_code)]
        research += ["--dataset", "codex-s", "--data-dir", data, "--device", "cuda", "--threads", "2"]
        steps.append(
            (
                "research-code",
                120,
                research + ["--rounds", "1", "--epochs", "3", "--json", str(out / "research-code.json")],
            )
        )
    steps += [
        (
            "fb15k-237-large-syncs",
            75,
            [python, __file__, "syncs", "--dataset", "fb15k-237", "--data-dir", data, "--candidates", "2000"]
            + ["--json", str(out / "fb15k-237-large-syncs.json")],
        ),
        (
            "torchrun-nccl",
            90,
            [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1", "-m", "torch_wge"]
            + ["train", "--dataset", "codex-s", "--root", str(args.root), "--epochs", "3", "--eval-every", "1"]
            + ["--device", "cuda", "--backend", "nccl", "--out", str(Path(tempfile.gettempdir()) / "bench-gpu-nccl")]
            + ["--overwrite", "--no-progress"],
        ),
        (
            "codex-s-example",
            60,
            [python, str(ROOT / "examples" / "link_pred_codex.py"), "--dataset", "codex-s", "--root", str(args.root)]
            + ["--epochs", "20", "--device", "cuda"],
        ),
    ]
    return steps


def run_check(args) -> None:
    """Runs ``check``'s steps, each with its time limit, and packs their outputs."""
    for name in ("data", "root", "baseline", "research_code", "out"):  # the steps run from the checkout's root
        setattr(args, name, Path(getattr(args, name)).resolve())
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name in ("codex-s", "fb15k-237"):
        prepare_root(Path(args.data), name, Path(args.root))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    steps = check_steps(args)
    unknown = set(args.steps or []) - {name for name, _, _ in steps}
    if unknown:
        raise SystemExit(f"bench_gpu.py check: no step {', '.join(sorted(unknown))} (or its research code is missing)")
    machine = gpu_name()
    versions = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, torch_geometric; print('torch', torch.__version__, 'torch_geometric', torch_geometric.__version__)",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    (out / "machine.txt").write_text(machine + versions.stdout + versions.stderr)
    summary, written = [], []
    for name, limit, command in steps:
        if args.steps and name not in args.steps:
            continue
        start = time.perf_counter()
        with open(out / f"{name}.txt", "w") as log:
            try:
                code = subprocess.run(
                    command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=limit
                ).returncode
            except subprocess.TimeoutExpired:
                code = "timed out"
        summary.append(f"{name}: exit {code} after {time.perf_counter() - start:.0f} s")
        written.append(name)
        (out / "summary.txt").write_text("\n".join(summary) + "\n")
    # at most 8 files come back from a call: the steps' outputs and records travel as one archive
    with tarfile.open(out / "steps.tar.gz", "w:gz") as archive:
        for path in sorted(out.iterdir()):
            if path.name not in ("summary.txt", "machine.txt", "steps.tar.gz"):
                archive.add(path, arcname=path.name)
                path.unlink()
    print((out / "machine.txt").read_text(), end="")
    with tarfile.open(out / "steps.tar.gz") as archive:
        for name in written:
            text = archive.extractfile(f"{name}.txt").read().decode(errors="replace")
            print(f"== {name}")
            print("\n".join(text.splitlines()[-12:]))
    print("\n".join(summary))


# ------------------------------------------------------------------ runs
def runs(args) -> None:
    """Several ``torch-wge train`` runs or ``tune`` workers side by side on one GPU."""
    out, folders = Path(args.out), Path(tempfile.gettempdir()) / "bench-gpu-runs"
    out.mkdir(parents=True, exist_ok=True)
    folders.mkdir(parents=True, exist_ok=True)
    for dataset in sorted(Path(args.data).iterdir()):
        if (dataset / "train.txt").is_file():
            prepare_root(Path(args.data), dataset.name, Path(args.root))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    summary = [gpu_name().strip()]
    dmon_file = open(out / "dmon.txt", "w")
    try:
        dmon = subprocess.Popen(
            ["nvidia-smi", "dmon", "-s", "um", "-d", "5"], stdout=dmon_file, stderr=subprocess.STDOUT
        )
    except OSError as error:  # no GPU's load to sample
        dmon_file.write(f"no nvidia-smi: {error}\n")
        dmon = None
    started: Dict[str, Tuple[subprocess.Popen, object]] = {}
    start = time.perf_counter()
    for line in Path(args.runs_file).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, command, *rest = line.split()
        if command not in ("train", "tune"):
            raise SystemExit(
                f"bench_gpu.py runs: {args.runs_file}: '{name} {command} ...': the command is train or tune"
            )
        argv = [sys.executable, "-m", "torch_wge", command, *rest, "--root", str(args.root), "--device", "cuda"]
        argv += ["--out", str(folders / name.split("@")[0]), "--no-progress"]
        argv += ["--time-limit", str(args.minutes), "--threads", str(args.threads)]
        log = open(folders / f"{name}.out", "w")
        started[name] = (subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log)
        summary.append(
            f"{name}: python -m torch_wge {command} {' '.join(rest)} --device cuda --time-limit {args.minutes} --threads {args.threads}"
        )
    for name, (process, log) in started.items():
        code = process.wait()
        log.close()
        last = (folders / f"{name}.out").read_text().strip().splitlines()[-1:] or [""]
        summary.append(f"{name}: exit {code} after {time.perf_counter() - start:.0f} s: {last[0]}")
    if dmon is not None:
        dmon.terminate()
    dmon_file.close()
    with tarfile.open(out / "runs.tar.gz", "w:gz") as archive:
        archive.add(folders, arcname=".", filter=lambda info: None if info.name.endswith(".pt") else info)
    (out / "summary.txt").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    default_out = os.environ.get("OUT") or str(Path(tempfile.gettempdir()) / "bench-gpu")
    c = commands.add_parser("check", help="the first command on a lent GPU machine (see above)")
    c.add_argument("--steps", nargs="+", help="run only these steps (default: all)")
    c.add_argument(
        "--data", default="data/datasets", help="folder holding codex-s/ and fb15k-237/ (default: %(default)s)"
    )
    c.add_argument("--root", default="data/root", help="the datasets' root for torch-wge train (default: %(default)s)")
    c.add_argument("--baseline", default="data/baseline", help="another checkout timed beside (default: %(default)s)")
    c.add_argument(
        "--research-code", default="data/research", help="the research code's checkout (default: %(default)s)"
    )
    c.add_argument(
        "--pytest-args",
        default="tests/training/test_cuda.py tests/nn/test_loss.py tests/nn/test_layer_state_script_dtypes.py "
        "tests/nn/test_matmul_dtype.py -k cuda",
        help="what cuda-tests runs (default: %(default)s)",
    )
    c.add_argument("--out", default=default_out, help="where the outputs go (default: $OUT)")
    g = commands.add_parser("graph-step", help="the whole step as one CUDA graph against the eager step")
    s = commands.add_parser("syncs", help="a CUDA step's host synchronisations, by line")
    ch = commands.add_parser("loss-chunks", help="the loss in the CPU's chunks against the GPU's")
    for p in (g, s, ch):
        p.add_argument("--dataset", default="fb15k-237")
        p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder holding DATASET/train.txt")
        p.add_argument("--json", help="write the record here")
    for p in (g, s):
        p.add_argument("--batch-size", type=int, default=1024)
        p.add_argument("--hidden-channels", type=int, default=64)
    g.add_argument("--device", default="cpu", help="cpu (the check only) or cuda")
    g.add_argument("--check-steps", type=int, default=4, help="steps compared with the eager step (default: 4)")
    g.add_argument("--max-batches", type=int, default=40, help="batches a timed epoch runs (default: 40)")
    g.add_argument("--epochs-timed", type=int, default=3)
    g.add_argument(
        "--full-batches", type=int, default=147, help="batches of a full epoch, to scale to (default: FB15k-237's 147)"
    )
    s.add_argument("--batches", type=int, default=4, help="batches probed (default: 4)")
    s.add_argument("--candidates", type=int, default=2000, help="sampled softmax candidates (0: all)")
    ch.add_argument("--recipe", default="large")
    ch.add_argument("--device", default="cuda")
    ch.add_argument("--repeat", type=int, default=2)
    r = commands.add_parser("runs", help="several train runs or tune workers side by side on one GPU")
    r.add_argument("runs_file", help="lines of NAME COMMAND ARGS...")
    r.add_argument("minutes", type=float, help="each run's --time-limit")
    r.add_argument("--threads", type=int, default=2, help="each run's --threads (default: 2)")
    r.add_argument("--data", default="data/datasets", help="folder of the datasets (default: %(default)s)")
    r.add_argument("--root", default="data/root", help="the datasets' root (default: %(default)s)")
    r.add_argument("--out", default=default_out, help="where the outputs go (default: $OUT)")
    args = parser.parse_args()
    {"check": run_check, "graph-step": graph_step, "syncs": syncs, "loss-chunks": loss_chunks, "runs": runs}[
        args.command
    ](args)


if __name__ == "__main__":
    main()
