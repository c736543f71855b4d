"""Datasets by name."""

import difflib
import errno
import functools
import os.path as osp
from typing import Any, Callable, Dict, Optional

from torch_wge import io
from torch_wge.datasets.base import KnowledgeGraphDataset
from torch_wge.datasets.codex import CoDEx
from torch_wge.datasets.folder import TriplesFolder
from torch_wge.datasets.freebase import FB15k237
from torch_wge.datasets.litwd import LitWD

#: Dataset name -> constructor taking ``(root, **kwargs)``. ``"folder"``
#: reads the triple files of the folder ``root`` (:class:`TriplesFolder`).
DATASETS: Dict[str, Callable[..., KnowledgeGraphDataset]] = {
    "codex-s": functools.partial(CoDEx, name="s"),
    "codex-m": functools.partial(CoDEx, name="m"),
    "codex-l": functools.partial(CoDEx, name="l"),
    "litwd1k": functools.partial(LitWD, name="1k"),
    "litwd19k": functools.partial(LitWD, name="19k"),
    "litwd48k": functools.partial(LitWD, name="48k"),
    "fb15k-237": FB15k237,
    "folder": TriplesFolder,
}


def get_dataset(name: str, root: Optional[str] = None, **kwargs: Any) -> KnowledgeGraphDataset:
    r"""Builds a dataset by name.

    Args:
        name (str): One of :obj:`DATASETS` (case-insensitive):
            ``codex-s``, ``codex-m``, ``codex-l``, ``litwd1k``,
            ``litwd19k``, ``litwd48k``, ``fb15k-237``, or ``folder`` for
            the triple files in :obj:`root` (see :class:`TriplesFolder`).
            A path to an existing folder is read as ``folder`` too (then
            :obj:`root` may be left out).
        root (str, optional): Root directory of the named datasets (raw files
            in ``root/<name>/raw``), or the folder of triple files for
            ``folder``.
        **kwargs (optional): Passed to the dataset class (e.g.
            :obj:`pre_transform`, :obj:`transform`, :obj:`unseen`).

    Example:
        >>> from torch_wge.datasets import get_dataset
        >>> dataset = get_dataset('codex-s', 'data')  # doctest: +SKIP
    """
    key = str(name).lower()
    if key in DATASETS:
        if root is None:
            raise ValueError(f"get_dataset({name!r}) needs a 'root' folder")
        return DATASETS[key](root=root, **kwargs)
    if osp.isdir(str(name)) and root is None:
        return TriplesFolder(str(name), **kwargs)
    raise unknown_dataset(str(name))


def looks_like_a_path(name: str) -> bool:
    """Whether the dataset ``name`` is written as a path (``./kg``, ``data/kg``, ``~/kg``), not a name."""
    return osp.sep in name or name.startswith((".", "~")) or (osp.altsep is not None and osp.altsep in name)


def unknown_dataset(name: str) -> Exception:
    """The error for a dataset ``name`` that is neither a name of :obj:`DATASETS` nor a folder: a
    path that does not exist is said to be missing; a name gets the closest names (difflib)."""
    if looks_like_a_path(name) or osp.lexists(name):
        if not osp.exists(name):
            return io.missing(name, "no such dataset folder")  # a link loop is said to be one
        return NotADirectoryError(
            errno.ENOTDIR, "is a file; a dataset folder holds train.txt, valid.txt and test.txt", name
        )
    close = difflib.get_close_matches(name.lower(), [n for n in DATASETS if n != "folder"], n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return ValueError(
        f"unknown dataset {name!r}; {hint}valid names: {', '.join(DATASETS)} "
        f"(or a path to a folder holding train.txt, valid.txt and test.txt)"
    )
