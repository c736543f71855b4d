"""Every file torch_wge writes, and the torch files it reads back.

**Writes are atomic.** A file is written to a temporary file in the same
folder, flushed to disk and renamed over its final name, so a kill at any
instant leaves either the previous content or the new one, never a partial
file. A failed write removes its temporary file; temporaries left by a
killed process are removed with :func:`remove_stale_temporaries`. A
destination that is a symbolic link is written through (the file it points
to is replaced); one that is no regular file (a device such as
``/dev/full``, a FIFO, a socket, a folder) is refused, never renamed over.
Errors are :class:`OSError` naming the destination file (e.g. ``No space
left on device: 'run/last.pt'``).

**Reads are bounded.** Every JSON, JSON-lines or YAML file the package
reads (settings, search spaces, a run's ``config.json`` and ``log.jsonl``,
results, study files) goes through :func:`read_document`: a regular file
only (a FIFO or a link to ``/dev/zero`` is refused without blocking), at
most :data:`MAX_DOCUMENT_BYTES`, nested at most :data:`MAX_DEPTH` deep
(checked before parsing, so no parser recursion runs out), YAML parsed
safely and without aliases (an alias can expand a few hundred bytes into
gigabytes). Its errors are :class:`UnreadableFileError` naming the file;
values quoted in error messages go through :func:`short_repr`, which cuts
before it formats.

**Reads run no code.** :func:`torch_load` reads a file of :func:`torch_save`
with ``weights_only=True`` only: tensors, numbers, strings, containers of
them and the classes allowlisted with
:func:`torch.serialization.add_safe_globals` (PyG's data classes). A file
holding anything else is refused before any of it is unpickled further,
with :class:`UnreadableFileError` naming the file.

**Folder locks.** :class:`FolderLock` is an ``flock`` on a folder itself,
taken by every process that writes there (a run folder, a study folder).
"""

import contextlib
import errno
import fcntl
import io
import json
import os
import pickle
import re
import reprlib
import stat
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, BinaryIO, Iterator, List, Optional, Union

#: Infix of every temporary file name (``.<name>.tmp-<random>``).
TEMP_INFIX = ".tmp-"

PathLike = Union[str, Path]


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: New files get the usual permissions (``mkstemp`` alone would make them private).
FILE_MODE = 0o666 & ~_read_umask()


class UnreadableFileError(ValueError):
    """A file read back that is damaged, not of the expected kind, or holds
    objects whose loading could run code; the message names the file."""


def writable_destination(path: PathLike) -> Path:
    """The file a write to ``path`` replaces: ``path``, or the file a
    symbolic link ``path`` points to.

    Raises:
        OSError: naming ``path`` when it exists and is no regular file (a
            device, FIFO, socket or folder), which a rename would replace.
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as error:
        raise _naming(error, path) from error
    _refuse_non_regular(mode, path, "replaced")
    return target


def readable_file(path: PathLike) -> Path:
    """``path``, checked to be a regular file (or a link to one) before it is read.

    Raises:
        OSError: naming ``path`` when it is a device, FIFO, socket or folder:
            a read of ``/dev/zero`` would never end and one of a FIFO could
            block forever. A missing file raises :class:`FileNotFoundError`.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise _naming(error, path) from error
    _refuse_non_regular(mode, path, "read")
    return path


def _refuse_non_regular(mode: int, path: Path, use: str) -> None:
    # a device, FIFO, socket or folder where a file is to be read or replaced
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
        raise OSError(errno.EINVAL, f"is {kind}, not a regular file; refused (it is never {use})", str(path))


def check_readable_folder(path: PathLike) -> None:
    """Raises :class:`PermissionError` naming ``path`` when it is a folder
    whose files cannot be listed or opened (no read or search permission),
    where a missing file would otherwise be reported."""
    if os.path.isdir(path) and not os.access(path, os.R_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "folder not readable (permission denied)", str(path))


def missing(path: PathLike, what: str = "does not exist") -> OSError:
    """The error for a ``path`` that cannot be found: ``what`` for a missing file
    (:class:`FileNotFoundError`), a symbolic link loop as a loop and a link to a missing file
    as such (an ``ls`` shows such a link, so "does not exist" would mislead)."""
    name = os.fspath(path)  # as given: "./kg" stays "./kg"
    if os.path.islink(name):
        try:
            os.stat(name)
        except OSError as error:
            if error.errno == errno.ELOOP:
                return OSError(errno.ELOOP, "a symbolic link loop (the link leads back to itself)", name)
        return FileNotFoundError(
            errno.ENOENT, f"a symbolic link to {short_repr(os.readlink(name), 200)}, which does not exist", name
        )
    return FileNotFoundError(errno.ENOENT, what, name)


@contextlib.contextmanager
def open_regular(path: PathLike) -> Iterator[BinaryIO]:
    """The regular file ``path`` (see :func:`readable_file`) open for reading,
    opened without blocking and checked again once open (a FIFO put there in
    between is refused too); its read errors name ``path``.

    Raises:
        OSError: naming ``path`` (missing, unreadable, or no regular file).
    """
    path = readable_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise _naming(error, path) from error
    with os.fdopen(fd, "rb") as f:
        _refuse_non_regular(os.fstat(fd).st_mode, path, "read")
        try:
            yield f
        except OSError as error:
            if error.filename is not None:  # an error naming its own file
                raise
            raise _naming(error, path) from error


def read_bytes(path: PathLike, max_bytes: Optional[int] = None) -> bytes:
    """The content of the regular file ``path``, opened by :func:`open_regular`.

    Raises:
        UnreadableFileError: naming ``path`` when it holds more than ``max_bytes``.
        OSError: naming ``path`` (missing, unreadable, or no regular file).
    """
    with open_regular(path) as f:
        content = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(content) > max_bytes:
        raise UnreadableFileError(f"{path}: larger than {max_bytes:,} bytes; refused (not read)")
    return content


#: The largest JSON, JSON-lines or YAML file :func:`read_document` reads.
MAX_DOCUMENT_BYTES = 64 * 2**20

#: The deepest nesting of lists and objects :func:`read_document` accepts (the package's own
#: files nest at most 5 deep).
MAX_DEPTH = 32

#: FORMATS of :func:`read_document`, and the file suffixes read as YAML by default.
DOCUMENT_FORMATS = ("json", "json-lines", "yaml")
YAML_SUFFIXES = (".yaml", ".yml")

# a JSON string (escapes included) or a bracket: the brackets outside strings give the nesting
_JSON_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[][{}]')


def read_document(path: PathLike, format: Optional[str] = None) -> Any:
    """The value of a JSON (``"json"``), JSON-lines (``"json-lines"``: a list of the values
    of its complete lines; a last line without its newline, left by a killed append, is left
    out) or YAML (``"yaml"``) file: by default YAML for a ``.yaml`` / ``.yml`` file, else JSON.
    The one path by which the package reads such files (see the module's description).

    Raises:
        UnreadableFileError: naming ``path`` (and the line of a JSON-lines file) when it is too
            large, not UTF-8, not valid, nested deeper than :data:`MAX_DEPTH`, or YAML with aliases.
        OSError: naming ``path`` when it is missing, unreadable or no regular file.
    """
    path = Path(path)
    if format is None:
        format = "yaml" if path.suffix.lower() in YAML_SUFFIXES else "json"
    if format not in DOCUMENT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(DOCUMENT_FORMATS)}, got {short_repr(format)}")
    content = read_bytes(path, MAX_DOCUMENT_BYTES)
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnreadableFileError(f"{path}: not UTF-8 text (byte {error.start})") from None
    if format == "yaml":
        return _parse_yaml(text, path)
    if format == "json":
        return _parse_json(text, str(path))
    lines = text.split("\n")[:-1]  # the text after the last newline is empty or torn
    return [_parse_json(line, f"{path}, line {number}") for number, line in enumerate(lines, 1)]


def _parse_json(text: str, where: str) -> Any:
    depth = 0
    for token in _JSON_NESTING.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise UnreadableFileError(f"{where}: nested deeper than {MAX_DEPTH} levels; refused")
        elif bracket in "]}":
            depth -= 1
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UnreadableFileError(
            f"{where}: not valid JSON ({error.msg}: line {error.lineno} column {error.colno})"
        ) from None
    except ValueError as error:  # an integer of more digits than Python converts
        raise UnreadableFileError(f"{where}: not valid JSON ({_first_line(error)[:120]})") from None


def _parse_yaml(text: str, path: Path) -> Any:
    try:
        import yaml
    except ImportError:
        raise UnreadableFileError(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or write JSON") from None
    try:
        depth = 0  # the parser's events come without recursion; the composer recurses, so it runs after
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise UnreadableFileError(
                    f"{path}: YAML aliases (*{short_repr(event.anchor)[1:-1]}) are refused (an alias can expand "
                    f"a small file into gigabytes); write the value out"
                )
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise UnreadableFileError(f"{path}: nested deeper than {MAX_DEPTH} levels; refused")
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
        return yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise UnreadableFileError(f"{path}: not valid YAML ({' '.join(str(error).split())[:160]})") from None
    except ValueError as error:  # a scalar its constructor cannot convert (an integer of 5,000 digits)
        if isinstance(error, UnreadableFileError):
            raise
        raise UnreadableFileError(f"{path}: not valid YAML ({_first_line(error)[:160]})") from None


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 6


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to at most ``limit`` characters, never formatting more of it than it
    shows (a long string or list, a deep nesting or a huge integer cost nothing).

    Example:
        >>> short_repr(list(range(10**6)))
        '[0, 1, 2, 3, 4, 5, ...]'
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        text = f"<an integer of {value.bit_length()} bits>"
    else:
        try:
            text = _SHORT.repr(value)
        except Exception:  # a repr that fails
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def atomic_open(path: PathLike) -> Iterator[BinaryIO]:
    """A binary file object whose content replaces ``path`` when the block
    ends without an exception (and is discarded otherwise). ``path`` may be
    a symbolic link (its target is replaced) but no other non-regular file
    (see :func:`writable_destination`)."""
    path = writable_destination(path)
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
    import torch  # here: reading settings files needs no torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_bytes(path, buffer.getvalue())


def torch_load(path: PathLike, map_location: Any = None) -> Any:
    """:func:`torch.load` of ``path`` with ``weights_only=True``, never
    falling back to full unpickling (as PyG's ``fs.torch_load`` does).

    Raises:
        UnreadableFileError: naming ``path`` when it holds objects other than
            tensors, numbers, strings, containers and allowlisted classes
            (refused: loading them could run code), or is damaged.
        OSError: a missing or unreadable file (naming it).
    """
    import torch

    path = readable_file(path)
    try:
        with warnings.catch_warnings():  # a plain pickle's "Detected pickle protocol 4": the error says enough
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        if "weights only" in str(error).lower():
            raise UnreadableFileError(
                f"{path} holds objects other than tensors, numbers, strings and PyG data; "
                f"refused (loading it could run code)"
            ) from None
        raise UnreadableFileError(f"{path} is corrupt or unreadable ({_first_line(error)})") from None
    except OSError as error:
        if error.filename is not None:
            raise  # a missing file or a permission error names the file itself
        raise UnreadableFileError(f"{path} is corrupt or unreadable ({_first_line(error)})") from None
    except Exception as error:  # torch raises many kinds on a damaged file
        raise UnreadableFileError(f"{path} is corrupt or unreadable ({_first_line(error)})") from None


def append_line(path: PathLike, line: str) -> None:
    """Appends ``line`` and a newline to ``path`` with one write, flushed to
    disk. A kill can at most leave the last line without its newline, which
    readers of append-only logs drop (see :func:`read_document`)."""
    path = writable_destination(path)
    try:
        with open(path, "ab") as f:
            f.write((line + "\n").encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
    except OSError as error:
        raise _naming(error, path) from error


def remove_stale_temporaries(folder: PathLike, older_than: float = 0.0) -> List[str]:
    """Removes the temporary files that killed writes left in ``folder``, those last modified
    more than ``older_than`` seconds ago; returns their names. With the default 0, call it only
    while no other process writes there; a live write's temporary is seconds old."""
    removed = []
    now = time.time()
    for path in Path(folder).glob(f".*{TEMP_INFIX}*"):
        with contextlib.suppress(FileNotFoundError):  # removed by another process meanwhile
            if path.is_file() and now - path.stat().st_mtime >= older_than:
                path.unlink(missing_ok=True)
                removed.append(path.name)
    return removed


#: Name of the file locked instead of its folder where a folder cannot be locked.
LOCK_FILE = ".lock"

#: The errors of ``flock`` on a folder where the file system cannot lock one
#: (NFS emulates ``flock`` with byte-range locks, which need a file open for writing).
_FOLDER_LOCK_UNSUPPORTED = (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)


class FolderLock:
    """An exclusive ``flock`` on a folder, held while a process writes there.

    The lock is on the folder itself, not on a file inside it, so no file
    removed by hand can let a second process in; the operating system
    releases it when the process ends, however it ends. On a file system
    that cannot lock a folder (NFS), the file :data:`LOCK_FILE` in it is
    locked instead (a lock file removed by hand then lets a second process
    in).

    Args:
        folder (str or Path): An existing folder.
        wait (bool, optional): Wait for another holder to release it; else
            :meth:`acquire` returns :obj:`False` at once. (default: :obj:`False`)
    """

    def __init__(self, folder: PathLike, wait: bool = False):
        self.folder = Path(folder)
        self.wait = wait
        self._fd: Optional[int] = None

    def acquire(self) -> bool:
        """Takes the lock; returns :obj:`False` if another process holds it (without ``wait``)."""
        try:
            return self._lock(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as error:
            if error.errno not in _FOLDER_LOCK_UNSUPPORTED:
                raise
        return self._lock(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT)

    def _lock(self, path: Path, flags: int) -> bool:
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as error:
            raise _naming(error, path) from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return False
            raise _naming(error, path) from error
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> "FolderLock":
        if not self.acquire():
            raise BlockingIOError(errno.EWOULDBLOCK, "in use by another process", str(self.folder))
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


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
