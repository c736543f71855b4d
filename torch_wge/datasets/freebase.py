"""FB15k-237 (Toutanova & Chen, 2015)."""

from torch_geometric.datasets import FB15k_237

from torch_wge.datasets.base import SPLIT_FILES, KnowledgeGraphDataset


class FB15k237(KnowledgeGraphDataset):
    r"""The FB15k-237 knowledge graph of `"Observed versus latent features for
    knowledge base and text inference"
    <https://aclanthology.org/W15-4007/>`_ (Freebase, inverse-relation
    leakage of FB15k removed), as used in WGE's Table 1.

    Its graph is PyG's :class:`~torch_geometric.datasets.FB15k_237`, the
    three splits joined by :func:`torch_wge.data.combine_splits`: the same
    files, downloaded from :obj:`FB15k_237.url`, and with the default
    :obj:`unseen="keep"` the same ids, edges and masks (tested). This class
    adds the identifiers (:attr:`entity_names`, :attr:`relation_names`), md5
    checks of the downloaded files, the :obj:`unseen` rule and a
    :obj:`pre_transform` stored with the graph (see
    :class:`~torch_wge.datasets.base.KnowledgeGraphDataset`). Raw files go to
    ``root/fb15k-237/raw``. The files end lines with ``\r\n``; identifiers
    such as ``/m/027rn`` are kept as they are. No label files.

    14,541 entities, 237 relations, 272,115 / 17,535 / 20,466 train / valid /
    test triples. Only 14,505 entities occur in training: 9 valid and 28 test
    triples hold one of the other 36, and are kept by default (see
    :obj:`unseen`).

    Args:
        root (str): Root directory.
        **kwargs (optional): :obj:`transform`, :obj:`pre_transform`,
            :obj:`force_reload`, :obj:`log`, :obj:`unseen` of
            :class:`~torch_wge.datasets.base.KnowledgeGraphDataset`.

    Example:
        >>> from torch_wge.datasets import FB15k237
        >>> dataset = FB15k237('data')  # doctest: +SKIP
        >>> dataset[0].num_nodes  # doctest: +SKIP
        14541
    """

    folder = "fb15k-237"
    urls = {f: f"{FB15k_237.url}/{f}" for f in SPLIT_FILES}
    md5 = {
        "train.txt": "c05b87b9ac00f41901e016a2092d7837",
        "valid.txt": "6a94efd530e5f43fcf84f50bc6d37b69",
        "test.txt": "f5bdf63db39f455dec0ed259bb6f8628",
    }
