"""The run folder of a training run: its lock and its append-only log."""

import json
from pathlib import Path
from typing import Any, Dict, List, Union

from torch_wge import io


class RunFolderBusy(RuntimeError):
    """Another process is training into the same run folder."""


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
