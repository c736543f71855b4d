"""The run folder of a training run: its lock, opening it for a new or a
resumed run, the repair of ``best.pt`` after a kill, its append-only log, and
the checkpoint a run folder stands for. Torch is imported only where a
checkpoint is written, so that the command line checks a run folder before it
loads torch."""

import errno
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from torch_wge import io
from torch_wge.training.settings_file import StoredError, read_stored_settings
from torch_wge.training.trackers import Tracker, report

#: The files of a run in its folder; a new run replaces them.
RUN_FILES = ("last.pt", "log.jsonl", "best.pt", "results.json", "config.json")

#: The events of the records a run's log holds.
LOG_EVENTS = ("epoch", "eval", "final")


class RunFolderBusy(RuntimeError):
    """Another process is training into the same run folder."""


class RunFolderHoldsRun(FileExistsError):
    """A new run was asked for in a folder that already holds one (``folder``),
    which ``resumable`` runs have a ``last.pt`` to continue from; or that holds
    ``files`` named as a run's (``log.jsonl``, ``config.json``) that are no
    torch_wge run's, which a new run would replace."""

    def __init__(self, folder: Path, resumable: bool = True, files: Sequence[str] = ()):
        how = (
            "fit(resume=True) continues it, fit(overwrite=True) replaces it"
            if resumable
            else "fit(overwrite=True) replaces it"
        )
        if files:
            held = f"holds {' and '.join(files)} of no torch_wge run"
            how = "fit(overwrite=True) replaces them"
        else:
            held = "already holds a run"
        super().__init__(f"{folder} {held}; {how}, or choose another out_dir")
        self.folder = folder
        self.resumable = resumable
        self.files = list(files)


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
    """The records of a ``log.jsonl`` (one JSON object per line), read by
    :func:`torch_wge.io.read_document`. A last line cut short by a killed
    append is left out.

    Raises:
        ValueError: naming the file (and line) of a file that cannot be read so, of a line
            that is not a JSON object, or whose ``epoch`` is no integer.
    """
    records = io.read_document(path, "json-lines")
    for number, record in enumerate(records, 1):
        if not isinstance(record, dict):
            raise ValueError(f"{path}, line {number}: expected a JSON object, found {io.short_repr(record, 40)}")
        epoch = record.get("epoch")
        if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
            raise ValueError(f"{path}, line {number}: 'epoch' must be an integer, found {io.short_repr(epoch, 40)}")
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
    torn = not io.read_bytes(path, io.MAX_DOCUMENT_BYTES).endswith(b"\n") and path.stat().st_size > 0
    if torn or len(kept) != len(records):
        io.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def append_record(path: Union[str, Path], record: Dict[str, Any]) -> None:
    """Appends one record to a ``log.jsonl``."""
    io.append_line(path, json.dumps(record))


def open_run_folder(folder: Path, resume: bool, overwrite: bool = False) -> RunLock:
    """Creates the run folder ``folder``, takes its lock and removes the
    temporary files that killed writes left there; returns the lock, held.
    A resumed run needs the folder's ``last.pt``; a new one a folder that
    holds no run (none of ``last.pt``, ``best.pt``, ``results.json``) and no
    ``log.jsonl`` or ``config.json`` but a torch_wge run's, unless ``overwrite``;
    the files of the replaced run (:data:`RUN_FILES`), or those of a run killed
    before its first checkpoint, are removed (a FIFO or device there is
    refused, not removed); where one is a symbolic link, the file it points to
    is removed and the link kept, so that the new run writes through it as a
    resumed one does.

    Raises:
        NotADirectoryError: when ``folder`` is a file.
        RunFolderBusy: when another process holds the lock.
        CheckpointError: for a resume without ``last.pt``.
        RunFolderHoldsRun: for a new run in a folder holding a run, or files of
            a run's names that no run wrote, without ``overwrite``.
    """
    from torch_wge.training.checkpoint import CheckpointError

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
            for name in RUN_FILES:
                io.writable_destination(folder / name)
            foreign = [] if overwrite else files_of_no_run(folder)
            if foreign:
                raise RunFolderHoldsRun(folder, resumable=False, files=foreign)
            for name in RUN_FILES:  # a symbolic link stays (written through, as on a resume): its file goes
                io.writable_destination(folder / name).unlink(missing_ok=True)
    except BaseException:
        lock.release()
        raise
    return lock


def files_of_no_run(folder: Path) -> List[str]:
    """The names of ``folder``'s ``log.jsonl`` and ``config.json`` when they are not those of
    a torch_wge run killed before its first checkpoint (its settings, checked, and a log of its
    records, or none), else nothing."""
    present = [name for name in ("log.jsonl", "config.json") if (folder / name).exists()]
    if not present:
        return []
    try:
        read_stored_settings(folder / "config.json")
        if (folder / "log.jsonl").exists() and not all(
            record.get("event") in LOG_EVENTS for record in read_log(folder / "log.jsonl")
        ):
            return present
    except (StoredError, ValueError, OSError):
        return present
    return []


def checkpoint_file(run: Union[str, Path]) -> Path:
    """The checkpoint ``run`` stands for: a run folder's ``best.pt``, or ``run`` itself (a
    checkpoint file), checked to exist and to be a regular file.

    Raises:
        FileNotFoundError: naming the file when there is none (a run never validated has no
            ``best.pt``), or it is a link to a missing file (said so).
        OSError: naming a FIFO, device or socket, or a symbolic link loop (said so).
    """
    path = Path(run)
    if path.is_dir():
        path = path / "best.pt"
        if not path.exists():
            raise io.missing(path, "no best checkpoint (the run was never validated)")
    elif not path.exists():
        raise io.missing(path, "does not exist (neither a checkpoint nor a run folder)")
    return io.readable_file(path)


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
    from torch_wge.training.checkpoint import CheckpointError, save_checkpoint

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
