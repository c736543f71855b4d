"""One base class for knowledge graphs stored as three triple files."""

import contextlib
import hashlib
import itertools
import os
import os.path as osp
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type

import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset, download_url
from torch_geometric.data.data import BaseData

from torch_wge import io
from torch_wge.transforms.views import ENTITY_FOCUSED, LEVI, RELATION_FOCUSED, STORAGE_VERSION

SPLIT_FILES = ("train.txt", "valid.txt", "test.txt")
#: The keys of a processed vocabulary file.
VOCABULARY_KEYS = ("entity_names", "relation_names", "entity_labels", "relation_labels", "num_dropped")
UNSEEN_CHOICES = ("keep", "drop", "error")
#: Age in seconds after which a temporary file in a processed folder is taken for one that a killed
#: write left there, and removed (a write takes seconds from its temporary file to its rename).
STALE_TEMPORARY_SECONDS = 3600

Triples = List[List[str]]


class DownloadError(RuntimeError):
    r"""A raw file could not be downloaded, or failed its md5 check."""


def md5sum(path: str, block_size: int = 1 << 20) -> str:
    r"""The md5 hex digest of the file at :obj:`path`."""
    digest = hashlib.md5()
    with open(io.readable_file(path), "rb") as f:
        for block in iter(lambda: f.read(block_size), b""):
            digest.update(block)
    return digest.hexdigest()


#: The longest line of a triples file: three identifiers never take this much. A longer one (a
#: binary file, a sparse file of NUL bytes without a newline) is refused once this much is read.
MAX_LINE_BYTES = 1 << 20

#: Bytes of a triples file read at a time.
READ_BLOCK_BYTES = 1 << 24

#: Memory a line of a triples file takes once read, besides its text: a list of three strings.
LINE_OVERHEAD_BYTES = 240

#: Characters refused in identifiers: control characters (C0 but the tab that separates the fields, a
#: carriage return but at a line's end, DEL, C1 with U+0085) and the line and paragraph separators, which
#: split a line for readers other than this one (``str.splitlines``, the TSV files of ``torch-wge export``).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]|\r(?!\r*(?:\n|\\Z))")


def read_triples(path: str) -> Tuple[Triples, List[int]]:
    r"""Reads a file of ``head<TAB>relation<TAB>tail`` lines.

    Identifiers are kept as opaque strings (only the line ending, ``\n`` or
    ``\r\n``, is removed); empty lines are skipped. The file is read
    :data:`READ_BLOCK_BYTES` at a time, so that a file that cannot be read
    is refused early: a line longer than :data:`MAX_LINE_BYTES` as soon as it
    is read, and a file whose lines would take more memory than the machine
    has (estimated from its size and the lines of its first block) before the
    rest is read.

    Returns:
        The triples as lists of three strings, in file order, and the
        1-based line number of each.

    Raises:
        ValueError: naming the file and the 1-based line number of the first
            line that does not hold exactly three non-empty tab-separated
            fields, that is too long, or whose identifiers hold a control
            character or a line separator (U+2028, ...); naming the file when
            it is not UTF-8, holds no triple, is too large for the memory, or
            the memory runs out while it is read.
    """
    rows: Triples = []
    linenos: List[int] = []
    padded: List[int] = []  # the first padded field's line, and the number of such fields
    size = os.stat(io.readable_file(path)).st_size
    try:
        with io.open_regular(path) as f:
            offset = lines = 0  # bytes and lines parsed
            tail = b""
            while True:
                block = f.read(READ_BLOCK_BYTES)
                data = tail + block
                cut = data.rfind(b"\n") + 1 if block else len(data)
                if len(data) - cut > MAX_LINE_BYTES:
                    line = lines + data.count(b"\n", 0, cut) + 1
                    raise ValueError(
                        f"{path}, line {line}: longer than {MAX_LINE_BYTES:,} bytes without a line break; no line "
                        f"of triples is (a binary file?)"
                    )
                tail = data[cut:]
                if cut:
                    lines = _parse_lines(path, data[:cut], offset, lines, rows, linenos, padded)
                    if offset == 0 and cut < size:
                        _check_memory_needed(path, size, cut, lines)
                    offset += cut
                if not block:
                    break
    except MemoryError:
        count = len(rows)
        rows.clear()
        linenos.clear()
        raise ValueError(
            f"{path}: out of memory while reading it ({size:,} bytes; {count:,} triples read), refused"
        ) from None
    if padded:
        warnings.warn(
            f"{path}, line {padded[0]}: an identifier begins or ends with a space ({padded[1]} such field(s) in the "
            f"file); kept as written, so it names another entity or relation than the one without the space",
            stacklevel=2,
        )
    if not rows:
        raise ValueError(f"{path} holds no triples (empty split)")
    return rows, linenos


def physical_memory() -> int:
    """The bytes of memory of this machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _check_memory_needed(path: str, size: int, read: int, lines: int) -> None:
    # refuses a file whose lines would take more memory than the machine has, estimated from its
    # size and the `lines` of its first `read` bytes
    needed = size / read * (lines * LINE_OVERHEAD_BYTES + read)
    available = physical_memory()
    if needed > available:
        raise ValueError(
            f"{path}: {size:,} bytes, about {size / read * lines:,.0f} lines, whose triples would take about "
            f"{needed / 2**30:.1f} GiB of memory once read, more than the {available / 2**30:.1f} GiB of this "
            f"machine; refused before it is read"
        )


def _parse_lines(
    path: str, content: bytes, offset: int, before: int, rows: Triples, linenos: List[int], padded: List[int]
) -> int:
    # appends the triples of `content` (whole lines, from byte `offset` of the file, after its first
    # `before` lines) to `rows` and their line numbers to `linenos`; returns the lines parsed so far
    try:
        text = content.decode("utf-8-sig" if offset == 0 else "utf-8")  # a leading BOM is dropped
    except UnicodeDecodeError as e:
        at = offset + e.start
        raise ValueError(f"{path}: not UTF-8 text (byte 0x{content[e.start]:02x} at offset {at})") from None
    control = _CONTROL.search(text)
    if control is not None:
        line = before + text.count("\n", 0, control.start()) + 1
        char = control.group()[0]
        raise ValueError(
            f"{path}, line {line}: an identifier holds the control character or line separator "
            f"{char.encode('unicode_escape').decode('ascii')} (U+{ord(char):04X}); refused, since it would break "
            f"the line for other readers (identifiers are opaque, but one line a triple)"
        )
    # identifiers are opaque: "Q1 " is another entity than "Q1", almost always a mistake in the file;
    # kept, but said once per file
    found = [match.start() for match in _PADDED_FIELD.finditer(text)]
    if found:
        if not padded:
            padded.extend([before + text.count("\n", 0, found[0]) + 1, 0])
        padded[1] += len(found)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    parsed = [line.rstrip("\r").split("\t") for line in lines]
    blank = [""]
    for i, row in enumerate(parsed):
        if row == blank:
            continue
        if len(row) != 3 or not all(row):
            fields = len(row)
            what = f"{fields} tab-separated field(s)" if fields != 3 else "an empty field"
            raise ValueError(
                f"{path}, line {before + i + 1}: expected 'head<TAB>relation<TAB>tail' "
                f"(three non-empty tab-separated fields) but found {what}: "
                f"{lines[i][:200]!r}"
            )
        rows.append(row)
        linenos.append(before + i + 1)
    return before + len(lines)


#: A field of a triple line that begins or ends with white space (other than the line ending).
_PADDED_FIELD = re.compile(r"(?:^|\t)[ \f\v\u00a0]|[ \f\v\u00a0](?:\t|\r?$)", re.MULTILINE)


def read_label_file(path: str) -> Dict[str, str]:
    r"""Reads ``id<TAB>label`` lines (lines without a tab are skipped)."""
    labels: Dict[str, str] = {}
    for line in _read_text(path).split("\n"):
        key, sep, label = line.rstrip("\r").partition("\t")
        if sep and key not in labels:
            labels[key] = label
    return labels


def read_label_json(path: str) -> Dict[str, str]:
    r"""Reads CoDEx-style ``{"id": {"label": ...}, ...}`` label files (by
    :func:`torch_wge.io.read_document`)."""
    content = io.read_document(path, "json")
    if not isinstance(content, dict):
        raise ValueError(f"{path}: expected a JSON object of identifiers to labels")
    return {
        key: value["label"]
        for key, value in content.items()
        if isinstance(value, dict) and isinstance(value.get("label"), str)
    }


def _read_text(path: str, encoding: str = "utf-8") -> str:
    # The text of a raw file (a regular one); a decoding error names the file.
    content = io.read_bytes(path)
    try:
        return content.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte 0x{content[e.start]:02x} at offset {e.start})") from None


def first_appearance_ids(splits: Sequence[Triples]) -> Tuple[List[str], List[str]]:
    r"""Entity and relation identifiers in order of first appearance:
    split by split, line by line, the head before the tail."""
    columns = [tuple(zip(*rows)) for rows in splits]  # (heads, rels, tails)
    entities = dict.fromkeys(
        itertools.chain.from_iterable(itertools.chain.from_iterable(zip(h, t)) for h, _, t in columns)
    )
    relations = dict.fromkeys(itertools.chain.from_iterable(r for _, r, _ in columns))
    return list(entities), list(relations)


def triple_ids(rows: Triples, entity_id: Dict[str, int], relation_id: Dict[str, int]) -> np.ndarray:
    r"""The ``[n, 3]`` id array of string triples."""
    ids = np.empty((len(rows), 3), dtype=np.int64)
    for column, ids_of in enumerate((entity_id, relation_id, entity_id)):
        ids[:, column] = np.fromiter((ids_of[row[column]] for row in rows), np.int64, len(rows))
    return ids


def _first_occurrences(ids: np.ndarray, num_entities: int, num_relations: int) -> np.ndarray:
    # Sorted positions of the first occurrence of each distinct triple.
    key = (ids[:, 0] * num_relations + ids[:, 1]) * num_entities + ids[:, 2]
    _, first = np.unique(key, return_index=True)
    return np.sort(first)


def _repr(obj) -> str:
    # Like PyG: the repr with memory addresses removed.
    return "None" if obj is None else re.sub("(<.*?)\\s.*(>)", r"\1\2", str(obj))


class KnowledgeGraphDataset(InMemoryDataset):
    r"""Base class of knowledge graphs given as three files
    ``train.txt``, ``valid.txt``, ``test.txt`` of
    ``head<TAB>relation<TAB>tail`` lines.

    The dataset holds **one** :class:`~torch_geometric.data.Data` graph over
    all triples: :obj:`edge_index` (LongTensor :math:`(2, |E|)`, head and
    tail), :obj:`edge_type` (LongTensor :math:`(|E|)`, relation ids without
    inverses), boolean :obj:`train_mask`, :obj:`val_mask`,
    :obj:`test_mask` (train triples first, then valid, then test, each in
    file order), :obj:`num_nodes` (number of entities) and
    :obj:`num_relations` (number of relations, inverses not counted).

    **Ids.** Entities and relations get ids in order of first appearance
    when reading ``train.txt``, then ``valid.txt``, then ``test.txt``, line
    by line (the head before the tail), so ids are deterministic and every
    entity seen in training has a smaller id than every entity seen only in
    evaluation. :attr:`entity_names` and :attr:`relation_names` map ids back
    to the original identifiers (opaque strings, leading zeros kept);
    :attr:`entity_labels` and :attr:`relation_labels` give human-readable
    labels (a label or :obj:`None` per id) when the dataset has label files,
    and are :obj:`None` otherwise.

    **Cleaning.** Empty lines are skipped. A line without exactly three
    non-empty tab-separated fields raises :class:`ValueError` naming the file
    and line; so does a split without triples. A triple repeated within one
    split is kept once (its first occurrence) and the number dropped is given
    in a warning and in :attr:`num_dropped`. Triples shared between splits
    are left as they are.

    **Entities or relations not seen in training.** By benchmark convention
    (and to match the published statistics, e.g. FB15k-237's 14,541
    entities, of which 14,505 occur in training) the default
    :obj:`unseen="keep"` keeps valid and test triples whose entities or
    relation never occur in ``train.txt``; they get ids after the training
    ones, have no training edge, and a warning gives their number.
    :obj:`unseen="drop"` removes those triples (a warning and
    :attr:`num_dropped` count them, and their unseen entities get no id);
    :obj:`unseen="error"` raises :class:`ValueError` naming the file and the
    line.

    **Files.** Raw files live in :obj:`raw_dir`
    (``root/<dataset>/raw`` for the named datasets). If the three split files
    are there, nothing is downloaded; otherwise the missing ones are
    downloaded from the class's URLs and checked against their known md5
    (files with no known md5 are not checked). A failed download or a wrong
    checksum raises :class:`DownloadError` naming the URL and the folder
    where the files can be placed by hand. Label files are optional: they are
    used when present and fetched alongside a download of the split files,
    but their absence never fails (a warning says so). Files placed by hand
    are not checksummed. Labels are read at processing time (an added
    label file changes the raw files' digest, so it is processed anew).

    **Processed files.** Processing follows PyG's
    :class:`~torch_geometric.data.InMemoryDataset` lifecycle (:meth:`download`,
    :meth:`process`, :meth:`save`, :meth:`load`). One processed copy is kept
    per (:obj:`pre_transform`, :obj:`unseen`) setting, in
    ``processed/<unseen>-<digest of repr(pre_transform)>``, so a changed
    pre-transform (e.g. another :obj:`beta` of
    :class:`~torch_wge.transforms.RelationFocusedTransform`) is processed
    anew instead of silently reusing the old graph, and PyG's comparison
    with its ``pre_transform.pt`` never warns; the digest also holds
    the version of the views' stored layout
    (:obj:`torch_wge.transforms.views.STORAGE_VERSION`), so a cache written
    in another layout is never read. The processed file names
    hold a digest of the content of the raw files (split and label files),
    so an edited or added raw file is processed anew too.

    The graph and the vocabulary are written atomically, so a process killed
    at any instant leaves each complete or absent, and several processes may
    process one folder at once. They are read with ``weights_only=True``
    only (see :func:`torch_wge.io.torch_load`): one that cannot be read so
    (damaged, or holding objects whose loading could run code) is rebuilt
    from the raw files, with a warning naming it. PyG writes its
    ``pre_transform.pt`` and ``pre_filter.pt`` in place and unpickles them
    with ``weights_only=False``; one that does not load with
    ``weights_only=True`` (cut short by a kill, or planted) is removed
    before PyG reads it. Temporary files that a killed write left are
    removed once an hour old.

    Args:
        root (str): Root directory.
        transform (callable, optional): Applied to the graph on every
            access. (default: :obj:`None`)
        pre_transform (callable, optional): Applied once before saving, e.g.
            the graph views of :mod:`torch_wge.transforms`.
            (default: :obj:`None`)
        force_reload (bool, optional): Re-process the raw files.
            (default: :obj:`False`)
        log (bool, optional): Print download and processing messages.
            (default: :obj:`True`)
        unseen (str, optional): What to do with valid and test triples whose
            entities or relation do not occur in training: :obj:`"keep"`,
            :obj:`"drop"` or :obj:`"error"`. (default: :obj:`"keep"`)
    """

    #: Folder name of the dataset under :obj:`root`.
    folder: str = ""
    #: Raw file name -> URL of the three split files.
    urls: Dict[str, str] = {}
    #: Raw file name -> md5 hex digest (files missing here are not checked).
    md5: Dict[str, str] = {}
    #: Optional label files: raw file name -> URL.
    label_urls: Dict[str, str] = {}
    #: The graphs of a family of datasets (``name`` of :class:`CoDEx`: "s", "m", "l").
    names: Tuple[str, ...] = ()

    @classmethod
    def check_name(cls, name: str) -> str:
        """``name`` in lower case, one of :attr:`names`; raises :class:`ValueError` otherwise."""
        key = str(name).lower()
        if key not in cls.names:
            raise ValueError(
                f"{cls.__name__}: unknown name {name!r}; expected one of {', '.join(repr(v) for v in cls.names)}"
            )
        return key

    def __init__(
        self,
        root: str,
        transform: Optional[Callable] = None,
        pre_transform: Optional[Callable] = None,
        force_reload: bool = False,
        log: bool = True,
        unseen: str = "keep",
    ) -> None:
        if unseen not in UNSEEN_CHOICES:
            raise ValueError(f"'unseen' must be one of {UNSEEN_CHOICES} (got {unseen!r})")
        self.unseen = unseen
        self._raw_digest: Optional[str] = None
        # PyG's lifecycle: downloads what is missing, processes unless the processed files exist
        super().__init__(root, transform, pre_transform, force_reload=force_reload, log=log)
        try:
            meta = self._load_processed()
        except io.UnreadableFileError as error:
            warnings.warn(f"{error}; processing the raw files again", stacklevel=3)
            self.process()
            meta = self._load_processed()
        self._remove_older_files()
        self.entity_names: List[str] = meta["entity_names"]
        self.relation_names: List[str] = meta["relation_names"]
        self.entity_labels: Optional[List[Optional[str]]] = meta["entity_labels"]
        self.relation_labels: Optional[List[Optional[str]]] = meta["relation_labels"]
        #: Triples dropped while processing, per split and reason.
        self.num_dropped: Dict[str, int] = meta["num_dropped"]

    @property
    def labelled_relation_names(self) -> List[str]:
        r"""Each relation's identifier followed by its label in parentheses where
        it has one (``"P1412 (languages spoken, written or signed)"``), else the
        identifier alone: the names ``torch-wge evaluate --per-relation`` prints."""
        labels = self.relation_labels or [None] * len(self.relation_names)
        return [f"{name} ({label})" if label else name for name, label in zip(self.relation_names, labels)]

    # Layout ----------------------------------------------------------------
    @property
    def raw_dir(self) -> str:
        return osp.join(self.root, self.folder, "raw")

    @property
    def processed_dir(self) -> str:
        key = f"{_repr(self.pre_transform)} views-v{STORAGE_VERSION}"  # a changed view layout is processed anew
        digest = hashlib.md5(key.encode("utf-8")).hexdigest()[:10]
        return osp.join(self.root, self.folder, "processed", f"{self.unseen}-{digest}")

    @property
    def raw_file_names(self) -> List[str]:
        return list(SPLIT_FILES)

    @property
    def label_file_names(self) -> List[str]:
        r"""Optional label files in :obj:`raw_dir` that processing reads."""
        return list(self.label_urls)

    @property
    def processed_file_names(self) -> List[str]:
        if self._raw_digest is None:
            self._raw_digest = self._digest_raw_files()
        return [f"data-{self._raw_digest}.pt", f"vocab-{self._raw_digest}.pt"]

    def _digest_raw_files(self) -> str:
        # Digest of the name and content of every raw file processing reads.
        names = [*SPLIT_FILES, *self.label_file_names]
        paths = [osp.join(self.raw_dir, name) for name in names]
        listing = [f"{osp.basename(path)} {md5sum(path)}" for path in paths if osp.exists(path)]  # a FIFO refused
        return hashlib.md5("\n".join(listing).encode()).hexdigest()[:12]

    # Download --------------------------------------------------------------
    def _fetch(self, filename: str, url: str) -> None:
        files = ", ".join(SPLIT_FILES) if filename in SPLIT_FILES else filename
        path = osp.join(self.raw_dir, filename)
        # downloaded under a temporary name: a killed download leaves no
        # partial file under the final name
        part = osp.join(self.raw_dir, f".{filename}{io.TEMP_INFIX}download")
        try:
            download_url(url, self.raw_dir, log=self.log, filename=osp.basename(part))
        except Exception as e:
            if osp.exists(part):
                os.remove(part)
            raise DownloadError(
                f"could not download {url} ({type(e).__name__}: {e}). "
                f"Without network access, place {files} by hand in "
                f"{self.raw_dir}"
            ) from e
        expected = self.md5.get(filename)
        if expected is not None:
            actual = md5sum(part)
            if actual != expected:
                os.remove(part)
                raise DownloadError(
                    f"md5 mismatch for {url}: expected {expected}, got "
                    f"{actual} (the file was removed). Place a correct "
                    f"copy of {filename} by hand in {self.raw_dir}"
                )
        os.replace(part, path)

    def download(self) -> None:
        io.check_readable_folder(self.raw_dir)  # its files are there, only unreadable
        for filename in SPLIT_FILES:
            if osp.islink(osp.join(self.raw_dir, filename)) and not osp.exists(osp.join(self.raw_dir, filename)):
                raise io.missing(osp.join(self.raw_dir, filename))  # a link loop or to nothing: not replaced
            if not osp.exists(osp.join(self.raw_dir, filename)):
                self._fetch(filename, self.urls[filename])
        for filename, url in self.label_urls.items():
            if not osp.exists(osp.join(self.raw_dir, filename)):
                try:
                    self._fetch(filename, url)
                except DownloadError as e:
                    warnings.warn(f"optional label file {filename} not available, labels stay None: {e}", stacklevel=2)

    # Labels ----------------------------------------------------------------
    def read_labels(self) -> Tuple[Optional[Dict[str, str]], Optional[Dict[str, str]]]:
        r"""Entity and relation labels found in :obj:`raw_dir` (identifier
        -> label), :obj:`None` where there is no label file. Subclasses
        override it; the base class has no labels."""
        return None, None

    def _optional_raw(self, *names: str) -> Optional[str]:
        # the first of the files `names` in raw_dir; one that is there but no regular file (a
        # FIFO, a folder) is returned too, so that reading it refuses it rather than skip it
        for name in names:
            path = osp.join(self.raw_dir, name)
            if osp.exists(path):
                return path
        return None

    # Processing ------------------------------------------------------------
    def _process(self) -> None:
        # PyG unpickles these two files with weights_only=False and writes them non-atomically: one
        # that a kill cut short, or that holds more than tensors and strings, is treated as absent
        for name in ("pre_transform.pt", "pre_filter.pt"):
            path = osp.join(self.processed_dir, name)
            try:
                if osp.isfile(path):
                    io.torch_load(path)
            except io.UnreadableFileError:
                Path(path).unlink(missing_ok=True)
        super()._process()

    def _remove_older_files(self) -> None:
        # processed files of older raw files, and temporaries that a killed write left
        current = set(self.processed_file_names)
        for entry in os.scandir(self.processed_dir):
            name = entry.name
            if (
                entry.is_file(follow_symlinks=False)
                and name.startswith(("data-", "vocab-"))
                and name.endswith(".pt")
                and name not in current
            ):
                with contextlib.suppress(FileNotFoundError):  # removed by another process meanwhile
                    os.remove(entry.path)
        io.remove_stale_temporaries(self.processed_dir, older_than=STALE_TEMPORARY_SECONDS)

    @classmethod
    def save(cls, data_list: Sequence[BaseData], path: str) -> None:
        r"""Saves the graphs :obj:`data_list` to :obj:`path` as PyG's
        :meth:`~torch_geometric.data.InMemoryDataset.save` does, atomically
        (see :func:`torch_wge.io.torch_save`)."""
        data, slices = cls.collate(data_list)
        io.torch_save((data.to_dict(), slices, data.__class__), path)

    def load(self, path: str, data_cls: Type[BaseData] = Data) -> None:
        r"""Loads the processed graph at :obj:`path` (PyG's
        :meth:`~torch_geometric.data.InMemoryDataset.load`, read with
        ``weights_only=True`` only, see :func:`torch_wge.io.torch_load`).

        Raises:
            torch_wge.io.UnreadableFileError: naming the file when it is
                damaged, holds objects whose loading could run code, or is
                no processed graph.
        """
        stored = io.torch_load(path)
        if isinstance(stored, tuple) and len(stored) == 3:
            stored, slices, data_cls = stored
        else:
            slices = None
        if not (isinstance(stored, dict) and isinstance(data_cls, type) and issubclass(data_cls, BaseData)):
            raise io.UnreadableFileError(f"{path} is not a processed graph (expected PyG's collated data)")
        error = graph_error(stored) if slices is None else None  # a graph of this class (one graph, not sliced)
        if error is not None:
            raise io.UnreadableFileError(f"{path} is not a processed graph of a knowledge graph ({error})")
        self.data, self.slices = data_cls.from_dict(stored), slices

    def _load_processed(self) -> dict:
        self.load(self.processed_paths[0])
        path = self.processed_paths[1]
        meta = io.torch_load(path)
        error = vocabulary_error(meta, self.num_entities, self.num_relations)
        if error is not None:
            raise io.UnreadableFileError(f"{path} is not the processed vocabulary of its graph ({error})")
        return meta

    def process(self) -> None:
        splits, lines = [], []
        for path in self.raw_paths:
            rows, linenos = read_triples(path)
            splits.append(rows)
            lines.append(linenos)
        num_dropped: Dict[str, int] = {}
        for i in (1, 2):
            splits[i], lines[i], num_dropped[f"{SPLIT_FILES[i]}:unseen"] = self._filter_unseen(
                i, splits[0], splits[i], lines[i]
            )

        entity_names, relation_names = first_appearance_ids(splits)
        entity_id = {name: i for i, name in enumerate(entity_names)}
        relation_id = {name: i for i, name in enumerate(relation_names)}
        parts = []
        for i, rows in enumerate(splits):
            ids = triple_ids(rows, entity_id, relation_id)
            first = _first_occurrences(ids, len(entity_id), len(relation_id))
            num_dropped[f"{SPLIT_FILES[i]}:duplicate"] = len(ids) - first.size
            if first.size < len(ids):
                warnings.warn(
                    f"{self.raw_paths[i]}: dropped {len(ids) - first.size} repeated triple(s) (kept the first of each)",
                    stacklevel=2,
                )
            parts.append(torch.from_numpy(ids[first]))

        data = _graph(parts, len(entity_id), len(relation_id))
        if self.pre_transform is not None:
            data = self.pre_transform(data)
        self.save([data], self.processed_paths[0])

        ent_labels, rel_labels = self.read_labels()
        io.torch_save(
            {
                "entity_names": entity_names,
                "relation_names": relation_names,
                "entity_labels": None if ent_labels is None else [ent_labels.get(name) for name in entity_names],
                "relation_labels": None if rel_labels is None else [rel_labels.get(name) for name in relation_names],
                "num_dropped": num_dropped,
            },
            self.processed_paths[1],
        )

    def _filter_unseen(
        self, i: int, train: Triples, rows: Triples, linenos: List[int]
    ) -> Tuple[Triples, List[int], int]:
        # Applies the 'unseen' rule to split i (valid or test): returns its
        # rows, their line numbers and the number dropped.
        path = self.raw_paths[i]
        entities = set(row[0] for row in train)
        entities.update(row[2] for row in train)
        relations = set(row[1] for row in train)
        unseen = [j for j, (h, r, t) in enumerate(rows) if h not in entities or t not in entities or r not in relations]
        if not unseen:
            return rows, linenos, 0
        if self.unseen == "error":
            raise ValueError(
                f"{path}, line {linenos[unseen[0]]}: entity or relation "
                f"not seen in {self.raw_paths[0]} ({len(unseen)} such "
                f"triple(s) in this file; pass unseen='keep' or 'drop')"
            )
        if self.unseen == "keep":
            warnings.warn(
                f"{path}: {len(unseen)} of {len(rows)} triple(s) have an "
                f"entity or relation that does not occur in training; "
                f"kept (benchmark convention)",
                stacklevel=3,
            )
            return rows, linenos, 0
        drop = set(unseen)
        warnings.warn(
            f"{path}: dropped {len(unseen)} of {len(rows)} triple(s) "
            f"whose entity or relation does not occur in training",
            stacklevel=3,
        )
        kept = [j for j in range(len(rows)) if j not in drop]
        if not kept:
            raise ValueError(f"{path} holds no triples once those with unseen entities are dropped")
        return [rows[j] for j in kept], [linenos[j] for j in kept], len(drop)

    # Convenience -----------------------------------------------------------
    @property
    def num_relations(self) -> int:
        r"""Number of relations (inverses not counted)."""
        return int(self._data.num_relations)

    @property
    def num_entities(self) -> int:
        r"""Number of entities."""
        return int(self._data.num_nodes)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _ids_error(name: str, value, rows: int, *bounds: int) -> Optional[str]:
    # why `value` is not an integer tensor of `rows` rows (1: a vector) whose row i lies in [0, bounds[i])
    shape_ok = isinstance(value, torch.Tensor) and value.dtype == torch.long
    shape_ok = shape_ok and (value.dim() == 1 if rows == 1 else value.dim() == 2 and value.size(0) == rows)
    if not shape_ok:
        return f"{name} must be a {'vector' if rows == 1 else f'[{rows}, n] tensor'} of int64 ids"
    for row, bound in zip(value.view(rows, -1), bounds):
        if row.numel() and not (0 <= int(row.min()) and int(row.max()) < bound):
            return f"{name} holds ids outside [0, {bound}): {int(row.min())} to {int(row.max())}"
    return None


def graph_error(stored: dict) -> Optional[str]:
    r"""Why ``stored`` (the attributes of a processed graph, as stored) is no graph of
    :class:`KnowledgeGraphDataset` with its views, or :obj:`None`: each count an integer, each id
    within its count (entities, relations, relation nodes), each mask a boolean vector of the
    edges. A cache edited or damaged so is not used (its ids would index out of range later)."""
    num_nodes: Any = stored.get("num_nodes")
    num_relations: Any = stored.get("num_relations")
    if not (_count(num_nodes) and _count(num_relations)):
        return "num_nodes and num_relations must be integers >= 0"
    checks = [
        _ids_error("edge_index", stored.get("edge_index"), 2, num_nodes, num_nodes),
        _ids_error("edge_type", stored.get("edge_type"), 1, num_relations),
    ]
    if any(checks):
        return next(error for error in checks if error)
    edges = stored["edge_index"].size(1)
    for mask in ("train_mask", "val_mask", "test_mask"):
        value = stored.get(mask)
        if not (isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.shape == (edges,)):
            return f"{mask} must be a boolean vector of the {edges} edges"
    if stored["edge_type"].numel() != edges:
        return f"edge_type must hold one relation per edge ({edges})"
    relation_nodes = stored.get("num_relation_nodes", 2 * num_relations)
    if not _count(relation_nodes):
        return "num_relation_nodes must be an integer >= 0"
    for view in (ENTITY_FOCUSED, RELATION_FOCUSED, LEVI):
        pairs = (
            [(view.edge_index, num_nodes, num_nodes)]
            if view.entity_relation_index is None
            else [
                (view.entity_relation_index, num_nodes, relation_nodes),
                (view.relation_relation_index, relation_nodes, relation_nodes),
            ]
        )
        for name, *bounds in pairs:
            if name is not None and stored.get(name) is not None:
                error = _ids_error(name, stored[name], 2, *bounds)
                if error is not None:
                    return error
    return None


def vocabulary_error(meta, num_entities: int, num_relations: int) -> Optional[str]:
    r"""Why ``meta`` (a processed vocabulary, as stored) is not that of a graph of
    ``num_entities`` entities and ``num_relations`` relations, or :obj:`None`: names one string
    per id, labels :obj:`None` or one string (or :obj:`None`) per id, ``num_dropped`` counts."""
    missing = [key for key in VOCABULARY_KEYS if not isinstance(meta, dict) or key not in meta]
    if missing:
        return f"no {', '.join(missing)}"
    for kind, count in (("entity", num_entities), ("relation", num_relations)):
        names, labels = meta[f"{kind}_names"], meta[f"{kind}_labels"]
        if not (isinstance(names, list) and len(names) == count and all(isinstance(n, str) for n in names)):
            return f"{kind}_names must be a list of {count} strings, found {io.short_repr(names)}"
        if labels is not None and not (
            isinstance(labels, list) and len(labels) == count and all(x is None or isinstance(x, str) for x in labels)
        ):
            return f"{kind}_labels must be None or a list of {count} labels, found {io.short_repr(labels)}"
    dropped = meta["num_dropped"]
    if not (isinstance(dropped, dict) and all(isinstance(k, str) and _count(v) for k, v in dropped.items())):
        return f"num_dropped must map reasons to counts, found {io.short_repr(dropped)}"
    return None


def _graph(parts: List[torch.Tensor], num_entities: int, num_relations: int) -> Data:
    # The one graph of the dataset from the id triples of each split.
    ids = torch.cat(parts)
    split = torch.repeat_interleave(torch.arange(3), torch.tensor([len(p) for p in parts]))
    return Data(
        edge_index=ids[:, [0, 2]].t().contiguous(),
        edge_type=ids[:, 1].contiguous(),
        train_mask=split == 0,
        val_mask=split == 1,
        test_mask=split == 2,
        num_nodes=num_entities,
        num_relations=num_relations,
    )
