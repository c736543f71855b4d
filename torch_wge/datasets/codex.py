"""CoDEx knowledge graphs (Safavi & Koutra, EMNLP 2020)."""

import os.path as osp
from typing import Callable, Dict, Optional, Tuple

from torch_wge.datasets.base import (
    SPLIT_FILES,
    KnowledgeGraphDataset,
    read_label_json,
)

CODEX_URL = "https://raw.githubusercontent.com/tsafavi/codex/master/data/triples/codex-{name}/{file}"
CODEX_RELATIONS_URL = "https://raw.githubusercontent.com/tsafavi/codex/master/data/relations/en/relations.json"
CODEX_ENTITIES_URL = "https://raw.githubusercontent.com/tsafavi/codex/master/data/entities/en/entities.json"

CODEX_MD5 = {
    "s": {
        "train.txt": "a212b97540f1b161b1d3bc3c64844783",
        "valid.txt": "52f6c4eb8ccd99d411196bc0bdb32378",
        "test.txt": "3b579e19cc094b3c6dc2b7c57df372c6",
    },
    "m": {
        "train.txt": "d507616dd7b9f6ddbacf83766efaa1dd",
        "valid.txt": "0fd5e85f41e0ba3ef6c10093cbe2a435",
        "test.txt": "7186374c5ca7075d268ccf316927041d",
    },
    "l": {},  # no known md5: not checked
}
CODEX_RELATIONS_MD5 = "7b4fd70177f5f027bb861c2f08a3047f"


class CoDEx(KnowledgeGraphDataset):
    r"""The CoDEx knowledge graphs of `"CoDEx: A Comprehensive Knowledge Graph
    Completion Benchmark" <https://arxiv.org/abs/2009.07810>`_ (Wikidata
    entities and relations), as used in WGE's Table 1.

    See :class:`~torch_wge.datasets.base.KnowledgeGraphDataset` for the
    graph layout, id order, cleaning and download rules. Raw files go to
    ``root/codex-<name>/raw``. The split files of CoDEx-S and CoDEx-M are
    checked against known md5 digests; CoDEx-L's are not (no known digest).
    Optional labels: ``relations.en.json`` and ``entities.en.json`` (from
    ``data/relations/en/`` and ``data/entities/en/`` of the CoDEx repository);
    :attr:`relation_labels` and :attr:`entity_labels` stay :obj:`None`
    without them.

    .. list-table::
        :header-rows: 1

        * - name
          - entities
          - relations
          - train
          - valid
          - test
        * - s
          - 2,034
          - 42
          - 32,888
          - 1,827
          - 1,828
        * - m
          - 17,050
          - 51
          - 185,584
          - 10,310
          - 10,311
        * - l
          - 77,951
          - 69
          - 551,193
          - 30,622
          - 30,622

    Args:
        root (str): Root directory.
        name (str, optional): :obj:`"s"`, :obj:`"m"` or :obj:`"l"`.
            (default: :obj:`"s"`)
        **kwargs (optional): :obj:`transform`, :obj:`pre_transform`,
            :obj:`force_reload`, :obj:`log`, :obj:`unseen` of
            :class:`~torch_wge.datasets.base.KnowledgeGraphDataset`.

    Example:
        >>> from torch_wge.datasets import CoDEx
        >>> from torch_wge.transforms import RelationFocusedTransform
        >>> dataset = CoDEx('data', name='s',  # doctest: +SKIP
        ...                 pre_transform=RelationFocusedTransform(beta=0.2))
        >>> data = dataset[0]  # doctest: +SKIP
        >>> data.num_nodes, data.num_relations  # doctest: +SKIP
        (2034, 42)
    """

    names = ("s", "m", "l")

    def __init__(
        self,
        root: str,
        name: str = "s",
        transform: Optional[Callable] = None,
        pre_transform: Optional[Callable] = None,
        force_reload: bool = False,
        log: bool = True,
        unseen: str = "keep",
    ) -> None:
        self.name = self.check_name(name)
        super().__init__(root, transform, pre_transform, force_reload=force_reload, log=log, unseen=unseen)

    @property
    def folder(self) -> str:  # type: ignore[override]
        return f"codex-{self.name}"

    @property
    def urls(self) -> Dict[str, str]:  # type: ignore[override]
        """Raw file name -> URL of this graph's three split files."""
        return {f: CODEX_URL.format(name=self.name, file=f) for f in SPLIT_FILES}

    @property
    def md5(self) -> Dict[str, str]:  # type: ignore[override]
        """Raw file name -> md5 hex digest (files missing here are not checked)."""
        return {**CODEX_MD5[self.name], "relations.en.json": CODEX_RELATIONS_MD5}

    label_urls = {
        "relations.en.json": CODEX_RELATIONS_URL,
        "entities.en.json": CODEX_ENTITIES_URL,
    }

    def read_labels(self) -> Tuple[Optional[Dict[str, str]], Optional[Dict[str, str]]]:
        out = []
        for filename in ("entities.en.json", "relations.en.json"):
            path = osp.join(self.raw_dir, filename)
            out.append(read_label_json(path) if osp.isfile(path) else None)
        return out[0], out[1]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(name={self.name!r})"
