"""Several processes on one machine: seconds per epoch, a step's phases and the encoder's memory,
with the encoder replicated (every process runs it whole) or sharded (``--encoder sharded``: each
process its share of the encoder's rows).

A setup is named ``PxT[-MODE]``: P processes of T threads each, ``MODE`` ``replicated`` or
``sharded`` for P > 1 (``torchrun --nproc_per_node P``); ``1xT-pair`` is two independent
one-process runs at the same time (what two processes cost each other without communicating:
memory bandwidth, caches).

``epochs``: ``torch-wge train`` in each setup (``--setups``, default ``1x2 2x1-replicated
2x1-sharded``) on the same data and settings. Each round trains every setup for ``--epochs``
epochs in a fresh run folder, the setups' order rotating from round to round; the seconds of each
epoch but the first (a warm-up) are read from the run's ``log.jsonl`` (training only). Reports the
median per setup, each setup's speed-up over the first one-process setup and each sharded setup's
over the replicated one of the same size. Arguments after ``--`` go to every ``torch-wge train``
(``--recipe fast --candidates 500``, ``--recipe large``, ...).

``phases``: where a training step's time goes, process by process: forward, backward, optimiser,
and the time spent inside each collective (``--setups``, default ``1x1 1x2 2x1-replicated
2x1-sharded 1x1-pair``, each in fresh processes). Each process builds the trainer of ``torch-wge
train`` for ``--dataset`` and ``--recipe`` and runs ``--steps`` optimiser steps on the epoch's first
batches, the first ``--warmup`` not counted, with a barrier before each step. Every collective of
``torch.distributed`` that the step calls from Python is timed (the all-gathers and all-to-alls of
the sharded encoder, the batch norms' all-reduces); ``DistributedDataParallel``'s gradient
all-reduce runs in its C++ reducer and stays inside "backward". With ``--barriers`` every
collective is preceded by a timed barrier, which parts waiting for the other process from the
collective itself. ``bench_step_ab.py`` runs it on two checkouts' ``torch_wge``.

``memory``: the encoder alone (forward and backward of the sum of its outputs, after one such
warm-up step) on the CoDEx-L-sized graph of ``bench_memory.py prepare``, in 1 process and in each of
``--processes`` processes (gloo) replicated and sharded, each in a fresh subprocess: "peak +MB" of
every process, and, exactly, the megabytes of the tensors autograd saved for the backward pass
(the activations, parameters not counted) and of the layers' outputs, which the decoders read whole
in every process.

Time it on a quiet machine with a free core per thread: other load skews the setups unevenly.

Examples::

    python benchmarks/bench_processes.py epochs --dataset codex-s --epochs 4 --rounds 2 \\
        --json sharded-codex-s-fast.json -- --recipe fast --candidates 500
    python benchmarks/bench_processes.py epochs --dataset fb15k-237 --epochs 3 --rounds 1 \\
        --setups 1x2 2x2-replicated 2x2-sharded 4x2-replicated 4x2-sharded 8x2-replicated 8x2-sharded \\
        --json processes-fb15k-237.json -- --recipe large
    python benchmarks/bench_processes.py phases --dataset fb15k-237 --recipe large --steps 14 --json phases.json
    python benchmarks/bench_memory.py prepare --graph /tmp/codex-l-synthetic.pt
    python benchmarks/bench_processes.py memory --graph /tmp/codex-l-synthetic.pt --json memory.json
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

from common import DEFAULT_DATA, peak_rss_mb, prepare_root, reset_peak_rss, write_record

COLLECTIVES = ("all_gather_single", "all_to_all_single", "all_reduce", "reduce_scatter_single")
#: the setups ``phases`` runs by default, as ``bench_step_ab.py`` offers them
SETUPS = ("1x1", "1x2", "2x1-replicated", "2x1-sharded", "1x1-pair")
_SETUP = re.compile(r"^(\d+)x(\d+)(?:-(replicated|sharded|pair))?$")


def parse_setup(name: str) -> Tuple[int, int, str, int]:
    """``PxT[-MODE]`` -> (processes, threads, encoder, runs side by side); raises ``ValueError``."""
    match = _SETUP.match(name)
    if not match:
        raise ValueError(f"{name!r}: a setup is PxT, PxT-replicated, PxT-sharded or 1xT-pair")
    processes, threads, mode = int(match[1]), int(match[2]), match[3]
    if processes < 1 or threads < 1 or (processes > 1) != (mode in ("replicated", "sharded")):
        raise ValueError(f"{name!r}: P processes > 1 take -replicated or -sharded, one process none (or -pair)")
    if mode == "pair" and processes != 1:
        raise ValueError(f"{name!r}: -pair is two independent one-process runs: 1xT-pair")
    return processes, threads, mode if processes > 1 else "sharded", 2 if mode == "pair" else 1


def setup_name(name: str) -> str:
    """``argparse`` type of a setup name: the name, once :func:`parse_setup` accepts it."""
    try:
        parse_setup(name)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return name


def launcher(processes: int) -> List[str]:
    """The command that starts a script or module in ``processes`` processes."""
    if processes == 1:
        return [sys.executable]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]


def processed_root(args, tmp: str) -> Path:
    """The dataset copied from ``--data-dir`` and processed once, before anything is timed."""
    root = Path(tmp) / "data"
    prepare_root(Path(args.data_dir), args.dataset, root)
    subprocess.run([sys.executable, "-m", "torch_wge", "stats", "--dataset", args.dataset, "--root", str(root)])
    return root


# ------------------------------------------------------------------ epochs
def epoch_seconds(command: List[str], out: Path) -> List[float]:
    """Runs ``command`` into the run folder ``out``; the seconds of each of its epochs."""
    subprocess.run(command + ["--out", str(out)], check=True)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [record["seconds"] for record in records if record["event"] == "epoch"]


def train_command(name: str) -> List[str]:
    processes, threads, encoder, side_by_side = parse_setup(name)
    if side_by_side > 1:
        raise SystemExit(f"epochs: {name}: two independent runs are a phases setup only")
    command = launcher(processes) + ["-m", "torch_wge", "train", "--threads", str(threads)]
    return command + (["--encoder", encoder] if processes > 1 else [])


def epochs(args) -> None:
    if args.epochs < 2:
        raise SystemExit("epochs: --epochs must be at least 2 (the first is a warm-up)")
    names = list(dict.fromkeys(args.setups or ["1x2", "2x1-replicated", "2x1-sharded"]))
    commands = {name: train_command(name) for name in names}
    with tempfile.TemporaryDirectory(prefix="bench_processes_") as tmp:
        root = processed_root(args, tmp)
        common = ["--dataset", args.dataset, "--root", str(root), "--device", "cpu", "--no-progress"]
        common += ["--epochs", str(args.epochs), "--eval-every", str(args.epochs)] + args.train_args
        seconds: Dict[str, List[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                out = Path(tmp) / f"{name}-{round_}"
                seconds[name] += epoch_seconds(commands[name] + common, out)[1:]
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, median in medians.items():
        print(f"{name:16s} {median:8.3f} s per epoch  ({len(seconds[name])} epochs)")
    speedups = {}
    one = next((name for name in names if parse_setup(name)[0] == 1), None)
    for name in names:
        processes, threads, encoder, _ = parse_setup(name)
        if one is not None and name != one:
            speedups[f"{name} over {one}"] = medians[one] / medians[name]
        replicated = f"{processes}x{threads}-replicated"
        if encoder == "sharded" and processes > 1 and replicated in medians:
            speedups[f"{name} over {replicated}"] = medians[replicated] / medians[name]
    for name, value in speedups.items():
        print(f"{name}: {value:.2f}x")
    if args.json:
        record = {
            "dataset": args.dataset,
            "train_args": args.train_args,
            "epochs_per_run": args.epochs,
            "rounds": args.rounds,
            "seconds_per_epoch": seconds,
            "median_seconds_per_epoch": medians,
            "speedups": speedups,
        }
        write_record(args.json, "bench_processes epochs", record)


# ------------------------------------------------------------------ phases
def time_collectives(totals: Dict[str, float], barriers: bool) -> None:
    """Wraps the collectives of ``torch.distributed`` so that each call adds its seconds to
    ``totals[name]`` (and, with ``barriers``, those of a barrier before it to ``totals["wait " + name]``)."""
    import torch.distributed as dist

    def timed(name, collective):
        def call(*args, **kwargs):
            if barriers:
                start = time.perf_counter()
                dist.barrier(group=kwargs.get("group"))
                totals["wait " + name] += time.perf_counter() - start
            start = time.perf_counter()
            result = collective(*args, **kwargs)
            totals[name] += time.perf_counter() - start
            return result

        return call

    for name in COLLECTIVES:
        setattr(dist, name, timed(name, getattr(dist, name)))


def phases_worker(args) -> None:
    """One process of a setup: writes ``{"rank", "ms"}``, every counted step's phases in ms, as a JSON
    file in ``args.results``."""
    import torch
    import torch.distributed as dist

    from torch_wge.training import TrainConfig
    from torch_wge.training.data import load_data
    from torch_wge.training.trainer import Trainer

    try:  # code from before the allocator setting left the package: as its torch-wge train ran
        from torch_wge.training.allocator import keep_freed_memory

        keep_freed_memory()
    except ImportError:
        pass
    torch.set_num_threads(args.threads)
    precision = {"precision": args.precision} if args.precision else {}  # else the code's default
    config = TrainConfig(
        dataset=args.dataset,
        root=args.root,
        recipe=args.recipe,
        encoder=args.encoder,
        device="cpu",
        seed=0,
        **precision,
    )
    _, data = load_data(config, log=False)
    with tempfile.TemporaryDirectory(prefix="bench_processes_") as out:
        trainer = Trainer(config, data, out, progress=False)
        totals: Dict[str, float] = defaultdict(float)
        time_collectives(totals, args.barriers)
        world = trainer.dist.world_size
        steps: Dict[str, List[float]] = defaultdict(list)
        trainer.loss_module.train()
        batches = trainer.queries.batch_indices(config.batch_size, trainer.generator)
        for step, chunk in zip(range(args.steps), batches):
            totals.clear()
            if world > 1:
                dist.barrier()
            start = time.perf_counter()
            first, stop = trainer.dist.shard(chunk.numel())
            heads, relations, positives = trainer.queries.batch(chunk[first:stop])
            loss = trainer.loss_module(heads, relations, positives, world * (stop - first) / chunk.numel())
            forward = time.perf_counter()
            in_forward = dict(totals)
            trainer.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            backward = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), config.grad_clip, foreach=True)
            trainer.optimizer.step()
            loss.item()
            end = time.perf_counter()
            if step < args.warmup:
                continue
            phases = {"step": end - start, "forward": forward - start, "backward": backward - forward}
            phases["optimiser"] = end - backward
            phases["collectives in forward"] = sum(v for k, v in in_forward.items() if not k.startswith("wait"))
            phases["collectives in backward"] = sum(v for k, v in totals.items() if not k.startswith("wait"))
            phases["collectives in backward"] -= phases["collectives in forward"]
            phases.update(totals)
            for name, seconds in phases.items():
                steps[name].append(1000 * seconds)
        rank = dist.get_rank() if dist.is_initialized() else 0
        result = {"rank": rank, "ms": steps}
        (Path(args.results) / f"{os.getpid()}.json").write_text(json.dumps(result))


def run_setup(name: str, args, root: Path) -> List[Dict]:
    """Runs a setup; each of its processes' ``{"rank", "ms"}``."""
    processes, threads, encoder, side_by_side = parse_setup(name)
    results = root.parent / f"results-{name}"
    results.mkdir()
    command = launcher(processes) + [__file__, "phases", "--worker", "--results", str(results)]
    command += ["--dataset", args.dataset, "--root", str(root)]
    command += ["--recipe", args.recipe, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    command += ["--threads", str(threads), "--encoder", encoder] + (["--barriers"] if args.barriers else [])
    command += ["--precision", args.precision] if args.precision else []
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    started = [subprocess.Popen(command, env=env) for _ in range(side_by_side)]
    for process in started:
        if process.wait() != 0:
            raise SystemExit(f"setup {name} failed (exit {process.returncode})")
    return [json.loads(path.read_text()) for path in sorted(results.glob("*.json"))]


def phases(args) -> None:
    if args.worker:
        return phases_worker(args)
    if args.steps <= args.warmup:
        raise SystemExit("phases: --steps must be larger than --warmup")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_processes_") as tmp:
        root = processed_root(args, tmp)
        for name in args.setups or list(SETUPS):
            results[name] = sorted(run_setup(name, args, root), key=lambda process: process["rank"])
            for index, process in enumerate(results[name]):
                medians = {phase: statistics.median(ms) for phase, ms in process["ms"].items()}
                figures = ", ".join(f"{phase} {ms:.1f}" for phase, ms in medians.items())
                print(f"{name:15s} process {index}: {figures} (ms, medians)", flush=True)
    if args.json:
        record = {
            "dataset": args.dataset,
            "recipe": args.recipe,
            "precision": args.precision or "the code's default",
            "steps": args.steps,
            "warmup": args.warmup,
            "barriers": args.barriers,
            "milliseconds": results,
        }
        write_record(args.json, "bench_step_phases", record)


# ------------------------------------------------------------------ memory
def _encoder_process(rank: int, path: str, processes: int, mode: str, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from bench_memory import wge_model

    from torch_wge.distributed import shard_encoder

    torch.set_num_threads(1)
    data = torch.load(path, weights_only=False)
    model, inputs = wge_model(data)
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
    """The encoder's step in ``processes`` processes (gloo), ``mode`` replicated or sharded: each
    process's peak +MB, saved activations, layer outputs and seconds."""
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


def memory(args) -> None:
    """The encoder's memory in 1 process, then in each of ``--processes`` replicated and sharded,
    each in a fresh subprocess; one line each, and a record of them all."""
    if args.one:
        print(json.dumps(measure_encoder(args.graph, args.one, args.encoder)))
        return
    from bench_memory import SIZES

    setups = [(1, "replicated")] + [(p, mode) for p in args.processes for mode in ("replicated", "sharded")]
    results = []
    for processes, mode in setups:
        command = [sys.executable, __file__, "memory", "--graph", args.graph, "--one", str(processes)]
        out = subprocess.run(command + ["--encoder", mode], check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        write_record(args.json, "bench_processes memory", {"graph": SIZES, "results": results})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    e = commands.add_parser("epochs", help="seconds per training epoch of each setup, side by side")
    p = commands.add_parser("phases", help="a step's forward, backward, optimiser and collectives, per process")
    for c in (e, p):
        c.add_argument("--dataset", default="codex-s", help="a folder name under --data-dir (default: codex-s)")
        c.add_argument("--data-dir", default=str(DEFAULT_DATA), help="folder of the raw datasets")
        c.add_argument("--setups", nargs="+", type=setup_name, help="PxT[-replicated|-sharded|-pair] (see above)")
        c.add_argument("--json", help="write the record here")
    e.add_argument("--epochs", type=int, default=4, help="epochs per run, the first a warm-up (default: 4)")
    e.add_argument("--rounds", type=int, default=2, help="runs of every setup (default: 2)")
    e.add_argument("train_args", nargs="*", help="after --: arguments of every torch-wge train")
    p.add_argument("--recipe", default="fast", help="training recipe (default: fast)")
    p.add_argument("--steps", type=int, default=14, help="optimiser steps per process (default: 14)")
    p.add_argument("--precision", help="TrainConfig.precision (default: the code's default)")
    p.add_argument("--warmup", type=int, default=2, help="first steps not counted (default: 2)")
    p.add_argument("--barriers", action="store_true", help="time a barrier before every collective")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--results", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--encoder", default="sharded", help=argparse.SUPPRESS)
    m = commands.add_parser("memory", help="the encoder's memory per process, replicated and sharded")
    m.add_argument("--graph", required=True, help="the graph of bench_memory.py prepare")
    m.add_argument("--processes", type=int, nargs="+", default=[2, 4], help="process counts (default: 2 4)")
    m.add_argument("--json", help="write the record here")
    m.add_argument("--one", type=int, help=argparse.SUPPRESS)
    m.add_argument("--encoder", choices=["replicated", "sharded"], default="sharded", help=argparse.SUPPRESS)
    args = parser.parse_args()
    {"epochs": epochs, "phases": phases, "memory": memory}[args.command](args)


if __name__ == "__main__":
    main()
