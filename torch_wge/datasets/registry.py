"""Datasets by name."""

import functools
import os.path as osp
from typing import Any, Callable, Dict, Optional

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
    raise ValueError(
        f"unknown dataset {name!r}; valid names: "
        f"{', '.join(DATASETS)} (or a path to a folder holding "
        f"train.txt, valid.txt and test.txt)"
    )
