"""The run folder of a training run: its lock, opening it for a new or a
resumed run, the repair of ``best.pt`` after a kill, and its append-only log."""

import errno
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from torch_wge import io
from torch_wge.training.checkpoint import CheckpointError, save_checkpoint
from torch_wge.training.trackers import Tracker, report


class RunFolderBusy(RuntimeError):
    """Another process is training into the same run folder."""


class RunFolderHoldsRun(FileExistsError):
    """A new run was asked for in a folder that already holds one (``folder``),
    which ``resumable`` runs have a ``last.pt`` to continue from."""

    def __init__(self, folder: Path, resumable: bool = True):
        how = (
            "fit(resume=True) continues it, fit(overwrite=True) replaces it"
            if resumable
            else "fit(overwrite=True) replaces it"
        )
        super().__init__(f"{folder} already holds a run; {how}, or choose another out_dir")
        self.folder = folder
        self.resumable = resumable


class RunLock(io.FolderLock):
    """An exclusive lock on a run folder, held while a run writes there: an
    ``flock`` on the folder itself (see :class:`torch_wge.io.FolderLock`),
    so no file removed from it lets a second run in, and a killed run never
    leaves it locked."""

    def acquire(self) -> bool:
        """Takes the lock; raises :class:`RunFolderBusy` if another process holds it."""
        if not super().acquire():
            raise RunFolderBusy(
                f"{self.folder} is in use by another training process; wait for it to end or choose another --out"
            )
        return True


def read_log(path: Union[str, Path]) -> List[Dict[str, Any]]:
    """The records of a ``log.jsonl`` (one JSON object per line). A last line
    cut short by a killed append is left out.

    Raises:
        ValueError: naming the file and line of a line that is not a JSON
            object, or whose ``epoch`` is no integer.
    """
    try:
        lines = io.read_lines(path)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text (byte {error.start})") from None
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {number}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}, line {number}: expected a JSON object, found {line[:40]!r}")
        epoch = record.get("epoch")
        if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
            raise ValueError(f"{path}, line {number}: 'epoch' must be an integer, found {json.dumps(epoch)[:40]}")
        records.append(record)
    return records


def truncate_log(path: Union[str, Path], epoch: int) -> None:
    """Keeps the records of ``path`` up to ``epoch`` (of the checkpoint a run
    resumes from) and drops the rest: records of epochs a killed run never
    checkpointed, a torn last line, and the final summary of a closed run.
    The file is replaced atomically, and only when something is dropped."""
    path = Path(path)
    if not path.is_file():
        return
    records = read_log(path)
    kept = [r for r in records if r.get("event") != "final" and r.get("epoch", 0) <= epoch]
    torn = not path.read_bytes().endswith(b"\n") and path.stat().st_size > 0
    if torn or len(kept) != len(records):
        io.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def append_record(path: Union[str, Path], record: Dict[str, Any]) -> None:
    """Appends one record to a ``log.jsonl``."""
    io.append_line(path, json.dumps(record))


def open_run_folder(folder: Path, resume: bool, overwrite: bool = False) -> RunLock:
    """Creates the run folder ``folder``, takes its lock and removes the
    temporary files that killed writes left there; returns the lock, held.
    A resumed run needs the folder's ``last.pt``; a new one a folder that
    holds no run (none of ``last.pt``, ``best.pt``, ``results.json``) unless
    ``overwrite``; the files of the replaced run, or the log of a run killed
    before its first checkpoint, are removed (a FIFO or device there is
    refused, not removed).

    Raises:
        NotADirectoryError: when ``folder`` is a file.
        RunFolderBusy: when another process holds the lock.
        CheckpointError: for a resume without ``last.pt``.
        RunFolderHoldsRun: for a new run in a folder holding a run, without ``overwrite``.
    """
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "is a file, not a run folder", str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    lock = RunLock(folder)
    lock.acquire()
    try:
        io.remove_stale_temporaries(folder)
        last = folder / "last.pt"
        if resume and not last.is_file():
            raise CheckpointError(f"nothing to resume: {last} does not exist (start without --resume)")
        if not resume:
            held = [name for name in ("last.pt", "best.pt", "results.json") if (folder / name).exists()]
            if held and not overwrite:
                raise RunFolderHoldsRun(folder, resumable=last.exists())
            for name in ("last.pt", "log.jsonl", "best.pt", "results.json"):
                io.writable_destination(folder / name)
                (folder / name).unlink(missing_ok=True)
    except BaseException:
        lock.release()
        raise
    return lock


def repair_best(
    folder: Path,
    last: Dict[str, Any],
    held_epoch: Callable[[Path], int],
    best_checkpoint: Callable[[Dict[str, Any], int, Dict[str, float]], Dict[str, Any]],
) -> None:
    """Makes the folder's ``best.pt`` hold the best epoch that ``last.pt``
    (its state ``last``) names: a kill between writing ``last.pt`` and
    ``best.pt`` left the previous best there, and ``last.pt`` of that epoch
    holds the new best weights (``best_model``) and their validation metrics
    (``best_valid``).

    Args:
        folder (Path): The run folder.
        last (dict): The checked state of its ``last.pt``.
        held_epoch (callable): The epoch of the ``best.pt`` at a path, read and checked.
        best_checkpoint (callable): The content of ``best.pt`` for
            ``(weights, epoch, validation metrics)``.

    Raises:
        CheckpointError: when the best weights are in neither file.
    """
    epoch, path = last["best"]["epoch"], folder / "best.pt"
    if epoch is None:
        return
    held: Optional[int] = held_epoch(path) if path.is_file() else None
    if held == epoch:
        return
    if last.get("best_model") is None or last["epoch"] != epoch:
        raise CheckpointError(
            f"{path} holds epoch {held} but {folder / 'last.pt'} names epoch {epoch} as the best; "
            f"the best weights are lost: start a new run"
        )
    save_checkpoint(best_checkpoint(last["best_model"], epoch, last["best_valid"]), path)


class RunLog:
    r"""The ``log.jsonl`` of a run, one JSON object a line: an ``"epoch"``
    record per trained epoch, an ``"eval"`` record per validation and a
    ``"final"`` one with the best checkpoint's metrics. Only the writing
    process (rank 0) writes; in the others every call does nothing. The
    epoch and validation records also go to ``trackers``
    (:func:`~torch_wge.training.trackers.report`).

    Args:
        path (Path): The log file.
        enabled (bool, optional): Whether this process writes. (default: :obj:`True`)
        trackers (list of Tracker, optional): Where the writing process also
            reports the run. (default: none)
    """

    def __init__(self, path: Path, enabled: bool = True, trackers: Sequence[Tracker] = ()):
        self.path = path
        self.enabled = enabled
        self.trackers = list(trackers) if enabled else []

    def _append(self, record: Dict[str, Any]) -> None:
        if self.enabled:
            append_record(self.path, record)
            report(self.trackers, record)

    def start(self, settings: Dict[str, Any], epoch: int) -> None:
        """The run starts (``epoch`` 0) or resumes after the checkpoint of ``epoch``:
        :meth:`Tracker.start <torch_wge.training.trackers.Tracker.start>` of every tracker."""
        for tracker in self.trackers:
            tracker.start(settings, epoch)

    def close(self) -> None:
        """The session ends: :meth:`Tracker.close <torch_wge.training.trackers.Tracker.close>` of every tracker."""
        for tracker in self.trackers:
            tracker.close()

    def truncate(self, epoch: int) -> None:
        """Drops the records after ``epoch``, the epoch a resumed run continues from (:func:`truncate_log`)."""
        if self.enabled:
            truncate_log(self.path, epoch)

    def epoch(self, epoch: int, loss: float, lr: float, seconds: float, wall_seconds: float) -> None:
        """The record of trained epoch ``epoch`` (from 1): its mean loss, learning rate and time."""
        self._append(
            {"event": "epoch", "epoch": epoch, "loss": loss, "lr": lr, "seconds": seconds, "wall_seconds": wall_seconds}
        )

    def validation(
        self,
        epoch: int,
        seconds: float,
        wall_seconds: float,
        metrics: Dict[str, float],
        trained: Optional[Dict[str, float]] = None,
    ) -> None:
        """The record of the validation after epoch ``epoch``: its flat metrics, and
        ``trained`` (those of the trained weights when the run averages them)."""
        record = {"event": "eval", "split": "valid", "epoch": epoch, "seconds": seconds, "wall_seconds": wall_seconds}
        record.update(metrics)
        if trained is not None:
            record["trained_weights"] = trained
        self._append(record)

    def final(self, best_epoch: Optional[int], valid: Dict[str, float], test: Optional[Dict[str, float]]) -> None:
        """The last record: the best epoch and its flat validation and test metrics (``None``: test not ranked)."""
        self._append({"event": "final", "best_epoch": best_epoch, "valid": valid, "test": test})
