"""The run folder of a training run: its lock and its append-only log."""

import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Union

from torch_wge import io

LOCK_NAME = ".lock"


class RunFolderBusy(RuntimeError):
    """Another process is training into the same run folder."""


class RunLock:
    """An exclusive lock on a run folder, held while a run writes there.

    The lock is an ``flock`` on ``<folder>/.lock``: the operating system
    releases it when the process ends, however it ends, so a killed run never
    leaves the folder locked. A run that ends cleanly removes the file
    (``release(remove=True)``, while still holding it); a process that locked
    the file just before it was removed finds it gone and locks a new one.
    """

    def __init__(self, folder: Union[str, Path]):
        self.path = Path(folder) / LOCK_NAME
        self._fd = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise RunFolderBusy(
                    f"{self.path.parent} is in use by another training process (it holds {self.path}); "
                    f"wait for it to end or choose another --out"
                ) from None
            raise
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if current is None or not os.path.samestat(os.fstat(fd), current):
            os.close(fd)  # locked a file that a finished run removed: lock the current one
            return self.acquire()
        self._fd = fd

    def release(self, remove: bool = False) -> None:
        """Drops the lock; with ``remove``, first deletes ``.lock`` (a run that ended cleanly)."""
        if self._fd is not None:
            if remove:
                self.path.unlink(missing_ok=True)
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def read_log(path: Union[str, Path]) -> List[Dict[str, Any]]:
    """The records of a ``log.jsonl`` (one JSON object per line). A last line
    cut short by a killed append is left out.

    Raises:
        ValueError: naming the file and line of a line that is not a JSON object.
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
