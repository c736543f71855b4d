r"""Data-parallel training and sharded evaluation over several processes.

Launched by ``torchrun`` (which sets ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``), :class:`~torch_wge.training.Trainer`
trains with :class:`torch.nn.parallel.DistributedDataParallel`; in one
process (no such variables, or ``WORLD_SIZE=1``) nothing here is used and
training is unchanged. The scheme, with :math:`W` processes:

- **Model and graph in every process, the encoder's rows sharded.** Each
  process holds the whole model, both graph views and its optimiser. With
  ``encoder="sharded"`` (the default) each process computes its share of
  every encoder layer's node rows and the layers' rows are gathered
  (:class:`~torch_wge.distributed.ShardedTwoViewEncoder`); with
  ``encoder="replicated"`` each runs the encoder over the whole graph. Either
  way the encoder output is the same in every process.
- **Queries are sharded.** Every process draws the same permutation of the
  (head, relation) training queries (the shuffle generator is seeded alike
  and restored from rank 0's checkpoint) and splits every global batch of
  :math:`B` queries into :math:`W` contiguous parts of :math:`B_j` queries
  (sizes differ by at most one; a part may be empty when :math:`B < W`).
- **Loss scaling.** The model's loss is a mean over the queries it is given.
  Process :math:`j` back-propagates :math:`W B_j / B` times its local mean;
  DDP averages gradients over the :math:`W` processes, so the gradient is
  :math:`\frac{1}{W} \sum_j \frac{W B_j}{B} \bar\ell_j = \frac{1}{B} \sum_b
  \ell_b`, the gradient of the global batch's mean loss, also when the parts
  are uneven. A process with an empty part back-propagates zero.
- **Decoder batch norm is synchronised.** Each decoder normalises its batch of
  queries with :class:`~torch.nn.BatchNorm1d`; sharded, a process would see
  only its part. :meth:`DistributedContext.distribute` converts those layers with
  :meth:`torch_wge.distributed.SyncedBatchNorm1d.convert` (to
  :class:`torch.nn.SyncBatchNorm` on CUDA, to
  :class:`~torch_wge.distributed.SyncedBatchNorm1d`, which also works on the CPU,
  elsewhere), so statistics, running averages and gradients are those of the
  global batch. The encoder's batch norms see all nodes: replicated, in every
  process; sharded, synchronised over the processes' rows.
- **Dropout.** Each process draws the dropout masks of its own part; the
  default generator of process :math:`j` is re-seeded at the start of every
  epoch from ``(seed, epoch, j)`` (:func:`dropout_seed`), so masks differ
  between processes and a resumed run draws the same masks as an
  uninterrupted one. The masks are not those a single process would draw
  for the whole batch, so with dropout > 0 a run with :math:`W` processes is
  statistically, not bitwise, the same as one process; with ``dropout=0``
  the parameters after an epoch equal a single process's to float rounding.
- **Evaluation is sharded** (:func:`torch_wge.evaluation.sharding.sharded_ranks`):
  each process ranks a contiguous range of the evaluator's queries, aligned
  to ``eval_batch_size`` chunks so that every query is scored in the same
  chunk as in one process; the ranks are gathered and every process
  summarises them: the metrics equal a single process's exactly.
- **Only rank 0 writes** logs, checkpoints, progress bars and results.
  Resuming, rank 0 reads ``last.pt`` and broadcasts it, so the other
  processes (and other machines) need no access to the run folder.
"""

import atexit
import hashlib
import os
import pickle
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, List, Optional, Tuple, TypeVar

import torch
import torch.distributed as dist

from torch_wge.distributed.batch_norm import SyncedBatchNorm1d
from torch_wge.distributed.sharded_encoder import shard_encoder
from torch_wge.evaluation.sharding import shard_bounds

__all__ = ["DistributedContext", "dropout_seed", "is_collective_failure", "resolve_device"]

T = TypeVar("T")


def dropout_seed(seed: int, epoch: int, rank: int) -> int:
    """Seed of the default generator of process ``rank`` in epoch ``epoch``
    (counted from 0) of a distributed run: distinct per process and epoch,
    and reproducible after a resume."""
    digest = hashlib.sha256(f"torch_wge-dropout/{seed}/{epoch}/{rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def is_collective_failure(error: BaseException) -> bool:
    """Whether ``error`` is a failed collective operation of the process
    group, as when another process of the run ended (killed, or failed with
    an error of its own) while this process is in a process group: a
    :class:`torch.distributed.DistError`, or the :class:`RuntimeError` that
    gloo and NCCL raise on a lost connection."""
    if not (dist.is_available() and dist.is_initialized()):
        return False
    text = str(error).lower()
    return isinstance(error, dist.DistError) or (isinstance(error, RuntimeError) and ("gloo" in text or "nccl" in text))


def resolve_device(device: Optional[str], local_rank: Optional[int] = None) -> torch.device:
    """The device a process computes on: ``device`` as given (``cpu:0`` as
    ``cpu``, the one name torch.load restores), or CUDA when available, else
    the CPU; in a CUDA run of several processes (``local_rank`` given),
    ``cuda:LOCAL_RANK`` (``cuda:0`` when each process sees one GPU).

    Raises:
        ValueError: for a name that is no CPU or CUDA device, a CUDA
            device this machine does not have, or a CUDA index under torchrun.
    """
    if device is None:
        resolved = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            resolved = torch.device(device)
        except RuntimeError:
            raise ValueError(f"unknown device {device!r}; expected cpu, cuda or cuda:N") from None
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; expected cpu, cuda or cuda:N")
    if resolved.type == "cpu":
        if resolved.index not in (None, 0):
            raise ValueError(f"device {device!r}: the CPU is one device; use cpu")
        return torch.device("cpu")  # one name: torch.load cannot restore storages tagged "cpu:0"
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available on this machine")
    count = torch.cuda.device_count()
    if local_rank is None:
        if (resolved.index or 0) >= count:
            raise ValueError(f"device {device!r}: this machine has {count} CUDA device(s)")
        return resolved
    if resolved.index is not None:
        raise ValueError(
            f"under torchrun every process uses cuda:LOCAL_RANK; got device {device}. "
            f"Pass --device cuda (or no --device) instead"
        )
    if count == 1:  # one visible GPU per process, e.g. through CUDA_VISIBLE_DEVICES
        return torch.device("cuda", 0)
    if local_rank >= count:
        raise ValueError(
            f"process with LOCAL_RANK {local_rank} has no GPU of its own: {count} are visible; "
            f"start at most {count} processes per machine (--nproc-per-node)"
        )
    return torch.device("cuda", local_rank)


def _destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@dataclass
class DistributedContext:
    r"""Where this process stands in a (possibly one-process) run: rank,
    world size, device and collective helpers that are no-ops in one process.

    Build it with :meth:`from_environment`.

    Attributes:
        rank (int): Global rank (0 in one process).
        world_size (int): Number of processes :math:`W` (1 in one process).
        local_rank (int): Rank on this machine.
        device (torch.device): The device this process computes on.
        backend (str, optional): ``"gloo"``, ``"nccl"``, ... or :obj:`None`
            in one process.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    backend: Optional[str] = None

    @classmethod
    def from_environment(
        cls, device: Optional[str] = None, backend: Optional[str] = None, timeout: Optional[timedelta] = None
    ) -> "DistributedContext":
        r"""Joins the process group that ``torchrun`` describes in the
        environment, or the one already initialised by the caller.

        Without ``WORLD_SIZE`` (or with ``WORLD_SIZE=1``) and no initialised
        group this is a one-process context on ``device`` (default: CUDA when
        available). Otherwise each process uses ``cuda:LOCAL_RANK`` when
        ``device`` is :obj:`None` or ``"cuda"`` and CUDA is available, the CPU
        when ``device="cpu"``; the backend defaults to ``"nccl"`` on CUDA and
        ``"gloo"`` on the CPU. A group created here is destroyed at exit.

        Args:
            device (str, optional): ``"cpu"``, ``"cuda"`` or :obj:`None`.
            backend (str, optional): Process-group backend. (default: automatic)
            timeout (timedelta, optional): Collective timeout.
                (default: PyTorch's)
        """
        if dist.is_available() and dist.is_initialized():
            world_size, rank = dist.get_world_size(), dist.get_rank()
            if world_size == 1:
                return cls(device=resolve_device(device))
            local_rank = int(os.environ.get("LOCAL_RANK", rank))
            return cls(rank, world_size, local_rank, resolve_device(device, local_rank), dist.get_backend())

        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return cls(device=resolve_device(device))
        if not dist.is_available():
            raise RuntimeError("WORLD_SIZE > 1 but this PyTorch build has no torch.distributed")
        missing = [name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
        if missing:
            raise RuntimeError(f"WORLD_SIZE={world_size} but {', '.join(missing)} unset: launch with torchrun")
        rank = int(os.environ["RANK"])
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        process_device = resolve_device(device, local_rank)
        backend = backend or ("nccl" if process_device.type == "cuda" else "gloo")
        if process_device.type == "cuda":
            torch.cuda.set_device(process_device)
        if timeout is None:
            dist.init_process_group(backend, rank=rank, world_size=world_size)
        else:
            dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timeout)
        atexit.register(_destroy_process_group)
        return cls(rank, world_size, local_rank, process_device, backend)

    # ------------------------------------------------------------ queries
    @property
    def enabled(self) -> bool:
        """Whether there are several processes."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the process that writes files."""
        return self.rank == 0

    def shard(self, size: int) -> Tuple[int, int]:
        """This process's contiguous part of ``range(size)`` (:func:`~torch_wge.evaluation.sharding.shard_bounds`)."""
        return shard_bounds(size, self.rank, self.world_size)

    # -------------------------------------------------------- collectives
    def barrier(self) -> None:
        if self.enabled:
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    def new_group(self):
        """A new process group over all ranks (call in every process), or
        :obj:`None` in one process."""
        return dist.new_group(backend=self.backend) if self.enabled else None

    def sum(self, value: float) -> float:
        """The sum of ``value`` over all processes."""
        if not self.enabled:
            return value
        total = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(total)
        return float(total.item())

    def on_main(self, fn: Callable[[], T]) -> T:
        """Calls ``fn`` in rank 0 only and returns its result in every
        process; an exception it raises is raised in every process. Use it
        for anything that reads the run folder (which may exist on rank 0's
        machine only)."""
        if not self.enabled:
            return fn()
        payload: List[Any] = [None]
        if self.is_main:
            try:
                payload[0] = (True, fn())
            except Exception as error:  # sent to every rank, raised there
                try:
                    pickle.dumps(error)
                except Exception:
                    error = RuntimeError(f"{type(error).__name__}: {error}")
                payload[0] = (False, error)
        dist.broadcast_object_list(payload, src=0, device=self.device if self.device.type == "cuda" else None)
        ok, value = payload[0]
        if not ok:
            raise value
        return value

    # ------------------------------------------------------------ wrapping
    def distribute(self, model: torch.nn.Module, encoder: str = "sharded") -> torch.nn.Module:
        """Prepares a :class:`~torch_wge.nn.WGE` ``model`` for data-parallel training over the
        processes (in one process it is returned as it is): the decoders' batch norms synchronised
        (:meth:`SyncedBatchNorm1d.convert`), and with ``encoder="sharded"`` the encoder computed in
        shares of its rows (:func:`~torch_wge.distributed.shard_encoder`; ``"replicated"``: whole
        in every process). Each gets a process group of its own. Returns ``model``; build the
        optimiser afterwards (the decoders' batch norms are new objects)."""
        if encoder not in ("sharded", "replicated"):
            raise ValueError(f"encoder must be 'sharded' or 'replicated', got {encoder!r}")
        if not self.enabled:
            return model
        decoders = getattr(model, "decoders", None)
        if decoders is not None:  # each decoder's batch norm sees only this process's queries
            SyncedBatchNorm1d.convert(decoders, self.new_group())
        if encoder == "sharded":
            shard_encoder(model, self.new_group())
        return model

    def data_parallel(self, module: torch.nn.Module) -> torch.nn.Module:
        """``module`` in :class:`~torch.nn.parallel.DistributedDataParallel` when there are
        several processes, else ``module`` itself."""
        if not self.enabled:
            return module
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=device_ids)

    def in_turn(self, fn: Callable[[], T]) -> T:
        """Calls ``fn`` in every process, first in rank 0, then in the first
        process of each other machine, then in the rest: for work that
        writes a shared cache (downloading and processing a dataset)."""
        if not self.enabled:
            return fn()
        turn = 0 if self.is_main else (1 if self.local_rank == 0 else 2)
        for phase in range(3):
            if phase == turn:
                result = fn()
            self.barrier()
        return result
