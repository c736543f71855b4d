"""What the benchmark scripts share: the machine and code a record was measured on, the record
writer, the datasets' copy, timers, resident memory, and the kernel counts of a profile.

Imports nothing but the standard library at import time (torch and torch_wge inside the
functions), so that a script run against another checkout's ``torch_wge`` (``PYTHONPATH``, as
``bench_step_ab.py`` does) imports the same helpers.
"""

import datetime
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Union

HERE = Path(__file__).resolve().parent
#: the checkout's root
ROOT = HERE.parent
#: where the raw datasets are read from by default: ``<name>/{train,valid,test}.txt``
DEFAULT_DATA = ROOT.parent / "shared" / "datasets"
#: where the benchmarks keep their records
RECORDS = HERE / "records"

# ------------------------------------------------------------------ machine and code
#: Vector instruction sets that change how fast the same code runs, as /proc/cpuinfo names them.
VECTOR_EXTENSIONS = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_bf16": "AVX-512 BF16", "amx_bf16": "AMX"}


def cpu_model() -> str:
    """The CPU's model name and its vector instruction sets, e.g. ``"AMD EPYC (AVX2)"``: records
    from machines with other instruction sets are not comparable."""
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        cpuinfo = []
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    extensions = [name for flag, name in VECTOR_EXTENSIONS.items() if flag in flags]
    return f"{model} ({', '.join(extensions)})" if extensions else model


def machine() -> Dict[str, Any]:
    """The CPU, its core count and, where CUDA is there, the GPU."""
    out: Dict[str, Any] = {"cpu": cpu_model(), "cpus": os.cpu_count()}
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        out["gpu"] = sys.modules["torch"].cuda.get_device_name()
    return out


def git_state(checkout: Path = ROOT) -> Dict[str, Any]:
    """Commit of a checkout and the library files that differ from it (what was measured)."""

    def git(*cmd):
        try:
            return subprocess.run(["git", *cmd], cwd=checkout, capture_output=True, text=True).stdout.rstrip()
        except OSError:
            return ""

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "modified": [line[3:] for line in git("status", "--short", "--", "torch_wge").splitlines()],
    }


def measured_code() -> Dict[str, Any]:
    """``{"measured_git": ...}``, the commit of the torch_wge this process imports, when it is not this
    checkout's (another checkout on ``PYTHONPATH``, as a baseline is measured); else nothing."""
    import torch_wge

    checkout = Path(torch_wge.__file__).resolve().parents[1]
    return {} if checkout == ROOT else {"measured_git": git_state(checkout)}


def script_command() -> str:
    """The command that runs this script with this process's arguments, from the checkout's root."""
    return " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def write_record(path: Union[str, Path], benchmark: str, fields: Dict[str, Any]) -> None:
    """Writes a benchmark's JSON record to ``path`` (atomically): the benchmark, the command that ran
    it (this script with this process's arguments), the machine, the date (UTC) and the code
    measured, then ``fields``, what it measured. Creates ``path``'s folder if need be."""
    from torch_wge.io import write_json

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    header = {
        "benchmark": benchmark,
        "command": script_command(),
        "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": git_state(),
        **measured_code(),
    }
    write_json(path, {**header, **fields})


# ------------------------------------------------------------------ data
def prepare_root(data_dir: Path, name: str, root: Path) -> None:
    """Copies ``data_dir/name/*`` into ``root/name/raw`` so nothing is downloaded."""
    src = Path(data_dir) / name
    if not (src / "train.txt").is_file():
        raise SystemExit(f"no {src / 'train.txt'}: pass --data-dir, the folder holding {name}/train.txt")
    raw = Path(root) / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.is_file():
            shutil.copyfile(path, raw / path.name)


def limit_batches(trainer, max_batches: int, batch_size: int, seed: int = 0) -> int:
    """Makes ``trainer.train_epoch()`` run ``max_batches`` full batches: its queries become a random
    subset of ``max_batches * batch_size`` of them (same statistics as all). Returns the number of
    batches an epoch now has."""
    import torch

    total = len(trainer.queries)
    if not max_batches or max_batches * batch_size >= total:
        return trainer.queries.num_batches(batch_size)
    index = torch.randperm(total, generator=torch.Generator().manual_seed(seed))[: max_batches * batch_size]
    trainer.queries = trainer.queries.subset(index.sort().values)
    return max_batches


def naive_wge():
    """The naive WGE of ``tests/naive_wge.py`` (dense adjacency, dense targets, autograd BCE, one
    query at a time in evaluation): the test suite's independent reference, the speed tables'
    naive baseline."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import naive_wge

    return naive_wge


# ------------------------------------------------------------------ time and memory
class Clock:
    """perf_counter that synchronises CUDA first."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")

    def __call__(self) -> float:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        return time.perf_counter()


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise KeyError(field)


def rss_mb() -> float:
    """Current resident set size (VmRSS) in MB; NaN without /proc."""
    try:
        return _status_mb("VmRSS")
    except (OSError, KeyError):
        return float("nan")


def peak_rss_mb() -> float:
    """Resident set high-water mark (VmHWM) in MB; without /proc, ru_maxrss."""
    try:
        return _status_mb("VmHWM")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak_rss() -> float:
    """Resets the high-water mark (``/proc/self/clear_refs``, Linux) and returns the current RSS in
    MB; without /proc, returns the peak so far (ru_maxrss)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_mb("VmRSS")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def memory_report(device: str) -> Dict[str, float]:
    """The process's peak resident memory, and on CUDA the peak of allocated GPU memory, in MB."""
    out = {"peak_rss_mb": peak_rss_mb()}
    if device.startswith("cuda"):
        import torch

        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


# ------------------------------------------------------------------ kernels
#: The profiler's names of the CUDA calls that launch a kernel, or a whole CUDA graph.
KERNEL_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
GRAPH_LAUNCHES = ("cudaGraphLaunch",)
#: ATen operators that make views or read metadata: no kernel of their own.
NO_KERNEL = {
    "aten::" + name
    for name in (
        "empty empty_strided empty_like new_empty view _unsafe_view reshape _reshape_alias as_strided slice "
        "select t transpose permute expand unsqueeze squeeze split split_with_sizes chunk narrow unbind "
        "unflatten flatten detach alias resolve_conj resolve_neg result_type lift_fresh _nnz crow_indices "
        "col_indices values"
    ).split()
}


def kernel_operators(prof) -> int:
    """The ATen operators in a ``torch.profiler`` profile that call no other and are no view: what
    launches a kernel each on a GPU, counted the same on the CPU."""
    count = 0
    for event in prof.events():
        if not event.name.startswith("aten::") or event.name in NO_KERNEL:
            continue
        if not any(child.name.startswith("aten::") and child.name not in NO_KERNEL for child in event.cpu_children):
            count += 1
    return count


def kernel_launches(prof, names=KERNEL_LAUNCHES) -> int:
    """The calls of ``names`` (by default the CUDA calls that launch a kernel; 0 on the CPU) in a
    ``torch.profiler`` profile."""
    return sum(event.count for event in prof.key_averages() if event.key in names)
