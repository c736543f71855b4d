"""Any folder of triple files."""

import hashlib
import os.path as osp
from typing import Any, Dict, List, Optional, Tuple

from torch_wge import io
from torch_wge.datasets.base import (
    SPLIT_FILES,
    KnowledgeGraphDataset,
    read_label_file,
)

ENTITY_LABEL_FILES = ("entity_labels.txt", "entity_labels.en.txt")
RELATION_LABEL_FILES = ("relation_labels.txt", "relation_labels.en.txt")


class TriplesFolder(KnowledgeGraphDataset):
    r"""A knowledge graph read from a folder that holds ``train.txt``,
    ``valid.txt`` and ``test.txt`` (``head<TAB>relation<TAB>tail`` lines).

    See :class:`~torch_wge.datasets.base.KnowledgeGraphDataset` for the
    graph layout, id order and cleaning rules. The files are read from
    :obj:`root` itself (nothing is downloaded). The processed graph is
    written to ``root/processed``, or with :obj:`cache_root` outside the
    folder, to ``cache_root/<folder name>-<digest of its absolute path>/processed``
    (how the command line keeps a user's data folder as it is). Optional
    labels (``id<TAB>label``): ``entity_labels.txt`` (or
    ``entity_labels.en.txt``) and ``relation_labels.txt`` (or
    ``relation_labels.en.txt``).

    Args:
        root (str): The folder holding the triple files.
        cache_root (str, optional): Folder for the processed graph.
            (default: :obj:`None`, ``root`` itself)
        **kwargs (optional): :obj:`transform`, :obj:`pre_transform`,
            :obj:`force_reload`, :obj:`log`, :obj:`unseen` of
            :class:`~torch_wge.datasets.base.KnowledgeGraphDataset`.

    Example:
        >>> from torch_wge.datasets import TriplesFolder
        >>> dataset = TriplesFolder('path/to/my_kg')  # doctest: +SKIP
    """

    def __init__(self, root: str, cache_root: Optional[str] = None, **kwargs: Any) -> None:
        self.cache_root = cache_root
        super().__init__(root, **kwargs)

    @property
    def raw_dir(self) -> str:
        return self.root

    @property
    def processed_dir(self) -> str:
        inside = super().processed_dir  # root/processed/<setting>
        if self.cache_root is None:
            return inside
        folder = osp.abspath(self.root)
        digest = hashlib.md5(folder.encode("utf-8")).hexdigest()[:8]
        return osp.join(self.cache_root, f"{osp.basename(folder)}-{digest}", osp.relpath(inside, self.root))

    def download(self) -> None:
        io.check_readable_folder(self.raw_dir)  # its files are there, only unreadable
        for name in SPLIT_FILES:
            path = osp.join(self.raw_dir, name)
            if osp.islink(path) and not osp.exists(path):  # a link loop, or a link to a missing file
                raise io.missing(path)
        missing: List[str] = [f for f in SPLIT_FILES if not osp.isfile(osp.join(self.raw_dir, f))]
        raise FileNotFoundError(
            f"TriplesFolder: {', '.join(missing)} not found in {self.raw_dir} (it must hold {', '.join(SPLIT_FILES)})"
        )

    @property
    def label_file_names(self) -> List[str]:
        return [*ENTITY_LABEL_FILES, *RELATION_LABEL_FILES]

    def read_labels(self) -> Tuple[Optional[Dict[str, str]], Optional[Dict[str, str]]]:
        ent = self._optional_raw(*ENTITY_LABEL_FILES)
        rel = self._optional_raw(*RELATION_LABEL_FILES)
        return (None if ent is None else read_label_file(ent), None if rel is None else read_label_file(rel))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.root!r})"
