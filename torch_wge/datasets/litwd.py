"""LiterallyWikidata knowledge graphs (Gesese et al., 2021)."""

from typing import Callable, Dict, Optional, Tuple

from torch_wge.datasets.base import (
    SPLIT_FILES,
    KnowledgeGraphDataset,
    read_label_file,
)

LITWD_URL = "https://raw.githubusercontent.com/GenetAsefa/LiterallyWikidata/main/Datasets/LitWD{size}/{file}"
LITWD_ENTITY_LABELS_URL = (
    "https://raw.githubusercontent.com/GenetAsefa/LiterallyWikidata/main/Datasets/Entities/entity_labels_en.txt"
)
LITWD_RELATION_LABELS_URL = (
    "https://raw.githubusercontent.com/GenetAsefa/LiterallyWikidata/main/Datasets/Relations/relation_labels_en.txt"
)

LITWD_MD5 = {
    "1k": {
        "train.txt": "42159443605b7fb7aae8f2defab2ba85",
        "valid.txt": "27bc6c836750b3f619c20080bbfbf4bd",
        "test.txt": "de860d4ff5db6d27c1212fd6d3b00e78",
    },
    "19k": {},  # no known md5: not checked
    "48k": {},  # no known md5: not checked
}


class LitWD(KnowledgeGraphDataset):
    r"""The LiterallyWikidata knowledge graphs LitWD1K, LitWD19K and LitWD48K
    of `"A Comprehensive Survey of Knowledge Graph Embeddings with Literals"
    <https://arxiv.org/abs/1910.12507>`_ (relational triples only), as used
    in WGE's Table 1.

    See :class:`~torch_wge.datasets.base.KnowledgeGraphDataset` for the
    graph layout, id order, cleaning and download rules. Raw files go to
    ``root/litwd<name>/raw``. LitWD1K's split files are checked against known
    md5 digests; LitWD19K's and LitWD48K's are not (no known digest).
    Optional labels (``id<TAB>label``): ``entity_labels.en.txt`` and
    ``relation_labels.en.txt``, from ``Datasets/Entities/entity_labels_en.txt``
    and ``Datasets/Relations/relation_labels_en.txt`` of the
    LiterallyWikidata repository.

    .. list-table::
        :header-rows: 1

        * - name
          - entities
          - relations
          - train
          - valid
          - test
        * - 1k
          - 1,533
          - 47
          - 26,115
          - 1,451
          - 1,451
        * - 19k
          - 18,986
          - 182
          - 260,039
          - 14,447
          - 14,447
        * - 48k
          - 47,998
          - 257
          - 303,117
          - 16,838
          - 16,838

    Args:
        root (str): Root directory.
        name (str, optional): :obj:`"1k"`, :obj:`"19k"` or :obj:`"48k"`.
            (default: :obj:`"1k"`)
        **kwargs (optional): :obj:`transform`, :obj:`pre_transform`,
            :obj:`force_reload`, :obj:`log`, :obj:`unseen` of
            :class:`~torch_wge.datasets.base.KnowledgeGraphDataset`.

    Example:
        >>> from torch_wge.datasets import LitWD
        >>> dataset = LitWD('data', name='1k')  # doctest: +SKIP
        >>> dataset.relation_labels[:2]  # doctest: +SKIP
    """

    names = ("1k", "19k", "48k")

    def __init__(
        self,
        root: str,
        name: str = "1k",
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
        return f"litwd{self.name}"

    @property
    def urls(self) -> Dict[str, str]:  # type: ignore[override]
        """Raw file name -> URL of this graph's three split files."""
        return {f: LITWD_URL.format(size=self.name.upper(), file=f) for f in SPLIT_FILES}

    @property
    def md5(self) -> Dict[str, str]:  # type: ignore[override]
        """Raw file name -> md5 hex digest (files missing here are not checked)."""
        return LITWD_MD5[self.name]

    label_urls = {
        "entity_labels.en.txt": LITWD_ENTITY_LABELS_URL,
        "relation_labels.en.txt": LITWD_RELATION_LABELS_URL,
    }

    def read_labels(self) -> Tuple[Optional[Dict[str, str]], Optional[Dict[str, str]]]:
        ent = self._optional_raw("entity_labels.en.txt")
        rel = self._optional_raw("relation_labels.en.txt")
        return (None if ent is None else read_label_file(ent), None if rel is None else read_label_file(rel))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(name={self.name!r})"
