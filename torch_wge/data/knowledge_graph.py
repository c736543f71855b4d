r"""The knowledge-graph layouts of a :class:`~torch_geometric.data.Data`
object that torch_wge reads.

Every triple :math:`(h, r, t)` is an edge ``h -> t`` of type ``r``. Three
layouts are accepted, and told apart by their attributes:

- **Masks** (:mod:`torch_wge.datasets`, PyG's
  :class:`~torch_geometric.datasets.WordNet18RR`): one :obj:`edge_index`
  ``[2, E]`` and :obj:`edge_type` ``[E]`` holding all triples, boolean
  :obj:`train_mask`, :obj:`val_mask`, :obj:`test_mask`. The number of
  relations :math:`R` is :obj:`num_relations` when set, else
  :obj:`edge_type.max() + 1` (PyG's :obj:`num_edge_types`).
- **Split attributes** (PyG's
  :class:`~torch_geometric.datasets.RelLinkPredDataset`):
  :obj:`train_edge_index` / :obj:`train_edge_type`, :obj:`valid_*` and
  :obj:`test_*` hold the triples, while :obj:`edge_index` /
  :obj:`edge_type` is a message-passing graph that already contains the
  reverse edges as relation types :math:`r + R`. Only the split attributes
  are read, so the inverses are never added a second time: :math:`R` is the
  number of relations of the splits (237 on FB15k-237, not 474).
  Data with masks whose training triples already hold every reverse edge as
  a relation type :math:`r + R/2` (and no :obj:`num_relations`) is detected
  and refused, since torch_wge adds the inverse relations itself.
- **One split without masks** (PyG's
  :class:`~torch_geometric.datasets.FB15k_237` with ``split=...``) is
  refused: nothing tells training triples from evaluation triples. Combine
  the three splits with :func:`combine_splits` first.

torch_wge models the inverse relation of :math:`r` itself as :math:`r + R`,
so in every layout the triples must be the knowledge graph's own, without
reverse edges.
"""
from typing import List, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, Dataset

#: Split names, as PyG's masks spell them (``"valid"`` is accepted too).
SPLITS = ("train", "val", "test")
_ALIASES = {"valid": "val", "validation": "val"}
# RelLinkPredDataset's attribute prefix of each split
_SPLIT_ATTRIBUTE = {"train": "train", "val": "valid", "test": "test"}


def _has(data: Data, key: str) -> bool:
    return key in data and data[key] is not None


def _split_name(split: str) -> str:
    name = _ALIASES.get(split, split)
    if name not in SPLITS + ("all",):
        raise ValueError(f"split must be 'train', 'val' (or 'valid'), 'test' or 'all', got {split!r}")
    return name


def has_split_attributes(data: Data) -> bool:
    r"""Whether :obj:`data` holds its triples in the split attributes of
    :class:`~torch_geometric.datasets.RelLinkPredDataset`
    (:obj:`train_edge_index`, :obj:`train_edge_type`, ...)."""
    return _has(data, "train_edge_index")


def _check_layout(data: Data) -> None:
    if not isinstance(data, Data):
        raise ValueError(f"expected a torch_geometric.data.Data knowledge graph, got {type(data).__name__}")
    if has_split_attributes(data):
        return
    if not _has(data, "edge_index") or not _has(data, "edge_type"):
        raise ValueError(
            "the knowledge graph needs 'edge_index' [2, E] (head, tail) and 'edge_type' [E] "
            "(one triple per edge)"
        )
    if not _has(data, "train_mask"):
        raise ValueError(
            "the knowledge graph has no 'train_mask': one split of a per-split dataset such as "
            "FB15k_237(split=...) cannot tell training from evaluation triples; combine the three "
            "splits with torch_wge.data.combine_splits(train, val, test), or set data.train_mask "
            "if every triple is a training triple"
        )


def check_edge_index(edge_index: Tensor, num_nodes: int, name: str = "edge_index") -> None:
    r"""Raises :class:`ValueError` naming :obj:`name` unless :obj:`edge_index`
    is an integer tensor of shape :math:`(2, E)` whose ids lie in
    :math:`[0, 	ext{num\_nodes})`: the check to pass before anything indexes
    an array of :obj:`num_nodes` rows with it. Costs one minimum and one
    maximum.

    Example:
        >>> check_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=2)
        Traceback (most recent call last):
        ...
        ValueError: edge_index holds node id 2, but the graph has num_nodes=2 (ids 0..1)
    """
    _check_integer(edge_index, name, "node")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"{name} must have shape [2, E], got {list(edge_index.shape)}")
    if int(num_nodes) < 1:
        raise ValueError(f"the graph needs num_nodes >= 1, got {num_nodes}")
    if edge_index.numel() == 0:
        return
    low, high = int(edge_index.min()), int(edge_index.max())
    if low < 0:
        raise ValueError(f"{name} holds node id {low}; ids must be >= 0")
    if high >= int(num_nodes):
        raise ValueError(f"{name} holds node id {high}, but the graph has num_nodes={num_nodes} (ids 0..{num_nodes - 1})")


def _check_integer(ids: Tensor, name: str, what: str) -> None:
    if not isinstance(ids, Tensor) or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        got = f"a {ids.dtype} tensor" if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(f"{name} must be an integer tensor of {what} ids, got {got}")


def check_knowledge_graph(data: Data) -> None:
    r"""Raises :class:`ValueError` unless :obj:`data` is a knowledge graph in
    a layout of this module whose triples index it safely: integer
    :obj:`edge_index` :math:`(2, E)` with entity ids in
    :math:`[0, 	ext{num\_nodes})`, integer :obj:`edge_type` :math:`(E)`
    with relation ids :math:`\geq 0`, and boolean split masks :math:`(E)`; the same for each split
    attribute of the split-attribute layout. The graph views of
    :mod:`torch_wge.transforms` check their input with it. Costs a minimum
    and a maximum per tensor.

    Example:
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 5]]),
        ...             edge_type=torch.tensor([0, 0]),
        ...             train_mask=torch.tensor([True, True]), num_nodes=3)
        >>> check_knowledge_graph(data)
        Traceback (most recent call last):
        ...
        ValueError: edge_index holds node id 5, but the graph has num_nodes=3 (ids 0..2)
    """
    _check_layout(data)
    num_nodes = int(data.num_nodes) if _has(data, "num_nodes") else None
    if has_split_attributes(data):
        prefixes = [p for p in _SPLIT_ATTRIBUTE.values() if _has(data, f"{p}_edge_index")]
        pairs: List[Tuple[str, str, List[str]]] = [(f"{p}_edge_index", f"{p}_edge_type", []) for p in prefixes]
    else:
        pairs = [("edge_index", "edge_type", [f"{s}_mask" for s in SPLITS if _has(data, f"{s}_mask")])]
    for index_name, type_name, masks in pairs:
        edge_index, edge_type = data[index_name], data.get(type_name)
        if num_nodes is None and isinstance(edge_index, Tensor) and edge_index.numel() > 0:
            num_nodes = int(edge_index.max()) + 1  # PyG infers it so
        check_edge_index(edge_index, num_nodes if num_nodes is not None else 1, index_name)
        num_edges = edge_index.size(1)
        _check_integer(edge_type, type_name, "relation")
        if edge_type.shape != (num_edges,):
            raise ValueError(f"{type_name} must have shape [E] = [{num_edges}] (one per edge), got {list(edge_type.shape)}")
        if edge_type.numel() > 0 and int(edge_type.min()) < 0:
            raise ValueError(f"{type_name} holds relation id {int(edge_type.min())}; ids must be >= 0")
        for mask_name in masks:
            mask = data[mask_name]
            if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.shape != (num_edges,):
                got = f"{mask.dtype} {list(mask.shape)}" if isinstance(mask, Tensor) else type(mask).__name__
                raise ValueError(f"{mask_name} must be a bool tensor of shape [E] = [{num_edges}], got {got}")


def num_kg_relations(data: Data) -> int:
    r"""The number of relations :math:`R` of the knowledge graph, inverse
    relations not counted (see the module documentation for each layout).

    Example:
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 2]]),
        ...             edge_type=torch.tensor([0, 4]),
        ...             train_mask=torch.tensor([True, True]), num_nodes=3)
        >>> num_kg_relations(data)  # no num_relations: edge_type.max() + 1
        5
    """
    _check_layout(data)
    if has_split_attributes(data):
        types = [data[f"{prefix}_edge_type"] for prefix in _SPLIT_ATTRIBUTE.values() if _has(data, f"{prefix}_edge_type")]
        found = max([int(t.max()) + 1 for t in types if t.numel() > 0], default=0)
        if _has(data, "num_relations") and int(data.num_relations) != found:
            raise ValueError(
                f"the knowledge graph's split attributes (train_edge_type, ...) use {found} relations "
                f"but it declares num_relations={data.num_relations}; the reverse edges of its "
                f"edge_index are not relations of their own: remove data.num_relations"
            )
        return found
    found = int(data.edge_type.max()) + 1 if data.edge_type.numel() > 0 else 0
    if not _has(data, "num_relations"):
        _refuse_reverse_edges(kg_triples(data, "train"), found)
        return found
    declared = int(data.num_relations)
    if declared < found:
        raise ValueError(
            f"the knowledge graph declares num_relations={declared} but its triples use relation "
            f"ids up to {found - 1}; if relations >= {declared} are reverse edges, remove them "
            f"(torch_wge adds the inverse relations itself), else set num_relations={found}"
        )
    return declared


def _refuse_reverse_edges(train: Tensor, num_relations: int) -> None:
    # Training triples of relations [R/2, R) that are exactly the reverses of
    # those of [0, R/2): reverse edges added as relation types r + R/2.
    half = num_relations // 2
    if num_relations % 2 or train.size(0) == 0:
        return
    upper = train[:, 1] >= half
    forward = torch.unique(train[~upper], dim=0)
    reverse = torch.unique(torch.stack([train[upper, 2], train[upper, 1] - half, train[upper, 0]], dim=1), dim=0)
    if forward.shape == reverse.shape and torch.equal(forward, reverse):
        raise ValueError(
            f"the training triples of relations {half}..{num_relations - 1} are exactly the reverses of those of "
            f"relations 0..{half - 1}: reverse edges added as relation types r + {half}; torch_wge adds inverse "
            f"relations itself, so keep only the triples of relations < {half}"
        )


def kg_triples(data: Data, split: str = "train") -> Tensor:
    r"""The triples of one split (``"train"``, ``"val"``, ``"test"``) or of
    all of them (``"all"``) as rows ``(head, relation, tail)``, read from
    any accepted layout (see the module documentation).

    Args:
        data (torch_geometric.data.Data): The knowledge graph.
        split (str, optional): The split. (default: :obj:`"train"`)

    Shapes:
        - **output:** :math:`(T, 3)`, long

    Example:
        >>> data = Data(edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]),
        ...             edge_type=torch.tensor([0, 1, 0]),
        ...             train_mask=torch.tensor([True, False, True]),
        ...             test_mask=torch.tensor([False, True, False]), num_nodes=3)
        >>> kg_triples(data, "test").tolist()
        [[1, 1, 2]]
    """
    _check_layout(data)
    name = _split_name(split)
    names = SPLITS if name == "all" else (name,)
    parts = []
    for part in names:
        if has_split_attributes(data):
            prefix = _SPLIT_ATTRIBUTE[part]
            if _has(data, f"{prefix}_edge_index"):
                edge_index, edge_type = data[f"{prefix}_edge_index"], data[f"{prefix}_edge_type"]
                parts.append(torch.stack([edge_index[0], edge_type, edge_index[1]], dim=1))
        elif _has(data, f"{part}_mask"):
            mask = data[f"{part}_mask"]
            parts.append(torch.stack([data.edge_index[0], data.edge_type, data.edge_index[1]], dim=1)[mask])
    if not parts:
        return torch.empty((0, 3), dtype=torch.long)
    return torch.cat(parts).long()


def unseen_triples(data: Data, split: str) -> Tensor:
    r"""Which triples of :obj:`split` (as :func:`kg_triples` lists them)
    have a head, tail or relation that no training triple has: a model ranks
    them with embeddings training never updated.

    Shapes:
        - **output:** :math:`(T)`, bool

    Example:
        >>> data = Data(edge_index=torch.tensor([[0, 1, 2], [1, 0, 0]]),
        ...             edge_type=torch.tensor([0, 0, 1]),
        ...             train_mask=torch.tensor([True, False, False]),
        ...             test_mask=torch.tensor([False, True, True]), num_nodes=3)
        >>> unseen_triples(data, "test").tolist()  # entity 2 and relation 1 are not in training
        [False, True]
    """
    train, triples = kg_triples(data, "train"), kg_triples(data, split)
    entity_seen = torch.zeros(int(data.num_nodes), dtype=torch.bool)
    entity_seen[train[:, 0]] = True
    entity_seen[train[:, 2]] = True
    relation_seen = torch.zeros(max(num_kg_relations(data), 1), dtype=torch.bool)
    relation_seen[train[:, 1]] = True
    return ~(entity_seen[triples[:, 0]] & entity_seen[triples[:, 2]] & relation_seen[triples[:, 1]])


def combine_splits(
    train: Union[Data, Dataset], val: Union[Data, Dataset], test: Union[Data, Dataset]
) -> Data:
    r"""Joins the three splits of a per-split dataset, such as PyG's
    :class:`~torch_geometric.datasets.FB15k_237` (one object per
    :obj:`split`), into one knowledge graph with masks: :obj:`edge_index`
    and :obj:`edge_type` of the train, val and test triples in that order,
    :obj:`train_mask`, :obj:`val_mask`, :obj:`test_mask`, :obj:`num_nodes`
    (the largest of the three) and :obj:`num_relations` (the largest
    relation id plus one).

    Args:
        train (Data or Dataset): The training split (a dataset is read as
            its first graph).
        val (Data or Dataset): The validation split.
        test (Data or Dataset): The test split.

    Example:
        >>> train = Data(edge_index=torch.tensor([[0, 1], [1, 2]]),
        ...              edge_type=torch.tensor([0, 1]), num_nodes=4)
        >>> val = Data(edge_index=torch.tensor([[2], [3]]),
        ...            edge_type=torch.tensor([1]), num_nodes=4)
        >>> test = Data(edge_index=torch.tensor([[3], [0]]),
        ...             edge_type=torch.tensor([0]), num_nodes=4)
        >>> data = combine_splits(train, val, test)
        >>> data.train_mask.tolist(), data.test_mask.tolist(), data.num_relations
        ([True, True, False, False], [False, False, False, True], 2)
    """
    parts = []
    for name, part in zip(SPLITS, (train, val, test)):
        if isinstance(part, Dataset):
            part = part[0]
        if not isinstance(part, Data) or not _has(part, "edge_index") or not _has(part, "edge_type"):
            raise ValueError(f"combine_splits: the {name} split needs 'edge_index' and 'edge_type'")
        if any(_has(part, f"{s}_mask") for s in SPLITS):
            raise ValueError(
                f"combine_splits: the {name} split already has masks; pass it to torch_wge as it is"
            )
        parts.append(part)
    sizes = [part.edge_index.size(1) for part in parts]
    split_id = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    edge_type = torch.cat([part.edge_type for part in parts]).long()
    return Data(
        edge_index=torch.cat([part.edge_index for part in parts], dim=1).long(),
        edge_type=edge_type,
        train_mask=split_id == 0,
        val_mask=split_id == 1,
        test_mask=split_id == 2,
        num_nodes=max(int(part.num_nodes) for part in parts),
        num_relations=int(edge_type.max()) + 1 if edge_type.numel() > 0 else 0,
    )
