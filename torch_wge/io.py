"""Atomic file writes: every file torch_wge writes goes through this module.

A file is written to a temporary file in the same folder, flushed to disk
and renamed over its final name, so a kill at any instant leaves either the
previous content or the new one, never a partial file. A failed write
removes its temporary file; temporaries left by a killed process are
removed with :func:`remove_stale_temporaries`. Errors are :class:`OSError`
naming the destination file (e.g. ``No space left on device: 'run/last.pt'``).
"""

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Iterator, List, Union

import torch

#: Infix of every temporary file name (``.<name>.tmp-<random>``).
TEMP_INFIX = ".tmp-"

PathLike = Union[str, Path]


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: New files get the usual permissions (``mkstemp`` alone would make them private).
FILE_MODE = 0o666 & ~_read_umask()


@contextlib.contextmanager
def atomic_open(path: PathLike) -> Iterator[BinaryIO]:
    """A binary file object whose content replaces ``path`` when the block
    ends without an exception (and is discarded otherwise)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}{TEMP_INFIX}", dir=path.parent)
    except OSError as error:
        raise _naming(error, path) from error
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _naming(error, path) from error
        raise
    _sync_folder(path.parent)


def write_bytes(path: PathLike, content: bytes) -> None:
    """Writes ``content`` to ``path`` atomically."""
    with atomic_open(path) as f:
        f.write(content)


def write_text(path: PathLike, text: str) -> None:
    """Writes ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, value: Any) -> None:
    """Writes ``value`` as indented JSON to ``path`` atomically."""
    write_text(path, json.dumps(value, indent=2) + "\n")


def torch_save(obj: Any, path: PathLike) -> None:
    """:func:`torch.save` of ``obj`` to ``path``, atomically. The object is
    serialised in memory first, so a failing disk raises a plain
    :class:`OSError` naming ``path``."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_bytes(path, buffer.getvalue())


def append_line(path: PathLike, line: str) -> None:
    """Appends ``line`` and a newline to ``path`` with one write, flushed to
    disk. A kill can at most leave the last line without its newline, which
    readers of append-only logs drop (see :func:`read_lines`)."""
    path = Path(path)
    try:
        with open(path, "ab") as f:
            f.write((line + "\n").encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
    except OSError as error:
        raise _naming(error, path) from error


def read_lines(path: PathLike) -> List[str]:
    """The complete lines of an append-only file (a last line without its
    newline, left by a killed append, is not among them)."""
    text = Path(path).read_bytes().decode("utf-8")
    lines = text.split("\n")
    return lines[:-1]  # the text after the last newline is empty or torn


def remove_stale_temporaries(folder: PathLike) -> List[str]:
    """Removes the temporary files that killed writes left in ``folder``;
    returns their names. Call it only while no other process writes there."""
    removed = []
    for path in Path(folder).glob(f".*{TEMP_INFIX}*"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def _naming(error: OSError, path: Path) -> OSError:
    """``error`` as the same kind of OSError with ``path`` as its file."""
    if error.errno is None:
        return error
    return type(error)(error.errno, error.strerror, str(path))


def _sync_folder(folder: Path) -> None:
    """Flushes a rename in ``folder`` to disk (where the platform allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
