"""The relation-focused view of WGE (Tong et al., ESWC 2023, Section 3.1)."""

import math
from typing import Iterator, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from torch_wge.data import num_kg_relations
from torch_wge.transforms._utils import training_triples, undirected_edges
from torch_wge.transforms.views import RELATION_FOCUSED, TwoViewData, add_view, view_fingerprint
from torch_wge.utils.segments import expand_segments
from torch_wge.utils.triples import add_inverse_triples, query_from_key, query_key

#: Default bound on the number of (incoming, outgoing) relation products
#: formed at once while extracting constraints (a chunk may exceed it by the
#: square of the largest number of distinct relations at one entity).
MAX_CHUNK_PRODUCTS = 1 << 18
#: Pair counts go to a dense table of all (2R)^2 ordered relation pairs when
#: it has at most this many entries, and are merged sparsely otherwise.
DENSE_PAIR_TABLE = 1 << 22


class RelationFocusedConstraints(NamedTuple):
    r"""What :func:`relation_focused_constraints` returns.

    Relations are numbered :math:`0, \ldots, 2|\mathcal{R}| - 1`; relation
    :math:`r + |\mathcal{R}|` is the inverse of relation :math:`r`.
    """

    #: Distinct :math:`(r_s, r_o)` pairs, ranked by count (descending), ties
    #: by :math:`r_s`, then :math:`r_o` (ascending); shape :math:`(P, 2)`.
    pairs: Tensor
    #: Number of distinct constraints of each pair; shape :math:`(P)`.
    pair_count: Tensor
    #: Whether each pair is kept; shape :math:`(P)`.
    pair_kept: Tensor
    #: Count of the last pair inside the top :math:`\lceil \beta P \rceil`;
    #: every pair with at least this count is kept. :obj:`None` when no pair
    #: is kept.
    cutoff: Optional[int]
    #: Number of distinct constraints.
    num_constraints: int
    #: Number of distinct constraints whose pair is kept.
    num_kept_constraints: int
    #: Distinct constraints :math:`(r_s, e_p, r_o)`, sorted by
    #: :math:`(e_p, r_s, r_o)`; shape :math:`(C, 3)`. :obj:`None` unless
    #: asked for.
    constraints: Optional[Tensor] = None
    #: Whether each constraint is kept; shape :math:`(C)`, or :obj:`None`.
    constraint_kept: Optional[Tensor] = None

    @property
    def num_pairs(self) -> int:
        return int(self.pairs.size(0))

    @property
    def num_kept_pairs(self) -> int:
        return int(self.pair_kept.sum())


def _check_beta(beta: float) -> float:
    beta = float(beta)
    if not 0.0 <= beta <= 1.0:  # also rejects NaN
        raise ValueError(f"'beta' must lie in [0, 1] (got {beta})")
    return beta


def num_top_pairs(beta: float, num_pairs: int) -> int:
    r"""The rank :math:`k = \lceil \beta P \rceil` of the cut-off pair.

    The product is rounded down by :math:`10^{-9}` first, so that a
    floating-point error cannot push an exact product up by one (for
    instance :math:`0.2 \cdot 2970` counts as :math:`594`).
    """
    beta = _check_beta(beta)
    return min(num_pairs, max(0, math.ceil(beta * num_pairs - 1e-9)))


class _Incidences(NamedTuple):
    entity: Tensor  # (I,) sorted
    relation: Tensor  # (I,) relation r in [0, 2R) such that entity is a tail of r
    degree: Tensor  # (N,) distinct incoming relations per entity
    ptr: Tensor  # (N,) first incidence of each entity


def _incidences(head: Tensor, rel: Tensor, tail: Tensor, num_nodes: int, num_relations: int) -> _Incidences:
    # Distinct (r_s, e_p) with e_p a tail of r_s, inverse relations added:
    # (h, r, t) gives (r, t) and (r + R, h). Entity e is a head of relation r
    # exactly when it is a tail of the inverse of r, so the outgoing
    # relations of e are its incoming ones, flipped: nothing more to store.
    queries = add_inverse_triples(torch.stack([head, rel, tail], dim=1), num_relations)
    key = torch.unique(query_key(queries[:, 2], queries[:, 1], num_relations))  # sorted by entity, then relation
    entity, relation = query_from_key(key, num_relations)
    degree = torch.bincount(entity, minlength=num_nodes)
    ptr = torch.cumsum(degree, 0) - degree
    return _Incidences(entity, relation, degree, ptr)


def _chunks(inc: _Incidences, max_products: int) -> List[Tuple[int, int]]:
    # Contiguous incidence ranges [a, b) holding whole entities and about
    # max_products (incoming, outgoing) products each.
    if inc.entity.numel() == 0:
        return []
    products = inc.degree * inc.degree
    before = torch.cumsum(products, 0) - products
    chunk_of_entity = before // max(1, int(max_products))
    chunk = chunk_of_entity[inc.entity]
    ids, sizes = torch.unique_consecutive(chunk, return_counts=True)
    ends = torch.cumsum(sizes, 0).tolist()
    starts = [0] + ends[:-1]
    return list(zip(starts, ends))


def _products(inc: _Incidences, start: int, end: int, num_relations: int) -> Tuple[Tensor, Tensor, Tensor]:
    # All constraints of the entities in incidences [start, end):
    # returns (incoming incidence i, incidence j of the outgoing relation,
    # validity), where the constraint is
    # (relation[i], entity[i], flip(relation[j])) and valid means
    # r_s != r_o up to inversion.
    entity = inc.entity[start:end]
    src, dst = expand_segments(inc.ptr[entity], inc.degree[entity])
    src = src + start
    r_s = inc.relation[src]
    r_o = (inc.relation[dst] + num_relations) % (2 * num_relations)
    valid = (r_s % num_relations) != (r_o % num_relations)
    return src[valid], dst[valid], r_s[valid] * (2 * num_relations) + r_o[valid]


class _ChunkedIncidences(NamedTuple):
    """The incidences of a knowledge graph's training triples, cut into chunks."""

    incidences: _Incidences
    chunks: List[Tuple[int, int]]
    num_relations: int

    @classmethod
    def of(cls, data: Data, max_products: Optional[int] = None) -> "_ChunkedIncidences":
        head, rel, tail, num_relations = training_triples(data)
        incidences = _incidences(head.long(), rel.long(), tail.long(), int(data.num_nodes), num_relations)
        chunks = _chunks(incidences, MAX_CHUNK_PRODUCTS if max_products is None else max_products)
        return cls(incidences, chunks, num_relations)

    def products(self) -> Iterator[Tuple[Tensor, Tensor, Tensor]]:
        """:func:`_products` of every chunk: (incoming incidence, outgoing incidence, pair id)."""
        for start, end in self.chunks:
            yield _products(self.incidences, start, end, self.num_relations)


def _select_pairs(graph: _ChunkedIncidences, beta: float) -> RelationFocusedConstraints:
    """Counts the distinct constraints of every :math:`(r_s, r_o)` pair and
    keeps the top pairs; the constraints themselves are not listed."""
    beta = _check_beta(beta)
    R2 = 2 * graph.num_relations
    # a dense table of the (2R)^2 pair ids when it is small, sparse merging else
    dense = R2 * R2 <= DENSE_PAIR_TABLE
    pair_count_all = torch.zeros(R2 * R2 if dense else 0, dtype=torch.long)
    sparse_ids, sparse_counts = [], []
    for _, _, pair in graph.products():
        if dense:
            pair_count_all += torch.bincount(pair, minlength=R2 * R2)
        else:
            ids, num = torch.unique(pair, return_counts=True)
            sparse_ids.append(ids)
            sparse_counts.append(num)
    if dense:
        pid = torch.nonzero(pair_count_all).view(-1)  # ascending
        count = pair_count_all[pid]
    elif sparse_ids:
        pid, inverse = torch.unique(torch.cat(sparse_ids), return_inverse=True)
        count = torch.zeros(pid.numel(), dtype=torch.long).scatter_add_(0, inverse, torch.cat(sparse_counts))
    else:
        pid = count = torch.empty(0, dtype=torch.long)
    count, order = torch.sort(count, descending=True, stable=True)
    pid = pid[order]
    k = num_top_pairs(beta, pid.numel())
    cutoff = int(count[k - 1]) if k > 0 else None
    pair_kept = count >= cutoff if cutoff is not None else torch.zeros_like(count, dtype=torch.bool)
    return RelationFocusedConstraints(
        pairs=torch.stack([pid // R2, pid % R2], dim=1),
        pair_count=count,
        pair_kept=pair_kept,
        cutoff=cutoff,
        num_constraints=int(count.sum()),
        num_kept_constraints=int(count[pair_kept].sum()),
    )


def _kept_products(
    graph: _ChunkedIncidences, selection: RelationFocusedConstraints
) -> Iterator[Tuple[Tensor, Tensor, Tensor, Tensor]]:
    """:meth:`_ChunkedIncidences.products` of every chunk with whether each constraint's pair is kept."""
    R2 = 2 * graph.num_relations
    kept_pairs = selection.pairs[selection.pair_kept]
    kept_ids = torch.sort(kept_pairs[:, 0] * R2 + kept_pairs[:, 1]).values
    for src, dst, pair in graph.products():
        if kept_ids.numel() == 0:
            kept = torch.zeros_like(pair, dtype=torch.bool)
        else:
            pos = torch.searchsorted(kept_ids, pair).clamp_(max=kept_ids.numel() - 1)
            kept = kept_ids[pos] == pair
        yield src, dst, pair, kept


def _list_constraints(graph: _ChunkedIncidences, selection: RelationFocusedConstraints) -> RelationFocusedConstraints:
    """``selection`` with its :obj:`constraints` and :obj:`constraint_kept`."""
    R2 = 2 * graph.num_relations
    parts, kept_parts = [], []
    for src, _, pair, kept in _kept_products(graph, selection):
        parts.append(torch.stack([pair // R2, graph.incidences.entity[src], pair % R2], dim=1))
        kept_parts.append(kept)
    constraints = torch.cat(parts) if parts else torch.empty(0, 3, dtype=torch.long)
    constraint_kept = torch.cat(kept_parts) if kept_parts else torch.empty(0, dtype=torch.bool)
    # products come grouped by entity; sort by (e_p, r_s, r_o)
    order = torch.argsort((constraints[:, 1] * R2 + constraints[:, 0]) * R2 + constraints[:, 2])
    return selection._replace(constraints=constraints[order], constraint_kept=constraint_kept[order])


def relation_focused_constraints(
    data: Data,
    beta: float = 0.2,
    return_constraints: bool = True,
    max_chunk_products: Optional[int] = None,
) -> RelationFocusedConstraints:
    r"""Extracts the relation-focused (RF) constraints of WGE from the
    training triples of :obj:`data` and selects the kept ones; see
    :class:`RelationFocusedTransform` for the definitions.

    The extraction first reduces the triples to their distinct
    (relation, entity) incidences, so the work and memory grow with the
    number of distinct constraints, not with the product of the triples
    meeting at a hub entity; entities are processed in chunks of about
    :obj:`max_chunk_products` products.

    Args:
        data (torch_geometric.data.Data): A knowledge graph in a layout of
            :mod:`torch_wge.data.knowledge_graph`.
        beta (float, optional): Fraction of the ranked :math:`(r_s, r_o)`
            pairs to keep, in :math:`[0, 1]`. (default: :obj:`0.2`)
        return_constraints (bool, optional): If :obj:`False`, only the pair
            statistics are returned and :obj:`constraints` and
            :obj:`constraint_kept` are :obj:`None`. (default: :obj:`True`)
        max_chunk_products (int, optional): Bound on the products formed at
            once; :obj:`None` takes :obj:`MAX_CHUNK_PRODUCTS` (:math:`2^{18}`).
            (default: :obj:`None`)

    Returns:
        :class:`RelationFocusedConstraints`

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> # 0 -r0-> 1 -r1-> 2
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 2]]),
        ...             edge_type=torch.tensor([0, 1]), num_nodes=3,
        ...             train_mask=torch.tensor([True, True]))
        >>> out = relation_focused_constraints(data, beta=1.0)
        >>> out.constraints.tolist()  # (r0, 1, r1) and (r1^-1, 1, r0^-1)
        [[0, 1, 1], [3, 1, 2]]
    """
    graph = _ChunkedIncidences.of(data, max_chunk_products)
    selection = _select_pairs(graph, beta)
    return _list_constraints(graph, selection) if return_constraints else selection


class RelationFocusedTransform(BaseTransform):
    r"""Adds the relation-focused view of
    `"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_ (WGE): a single undirected graph
    over entity and relation nodes, built from the relation-focused (RF)
    constraints :math:`(r_s, e_p, r_o)` of the training triples.

    With :math:`\mathcal{G}^{+} = \mathcal{G}_{train} \cup
    \{(t, r + |\mathcal{R}|, h) : (h, r, t) \in \mathcal{G}_{train}\}` (the
    training triples with inverse relations), the distinct constraints are

    .. math::
        \mathcal{C} = \big\{ (r_s, e_p, r_o) \;:\;
        (\cdot, r_s, e_p) \in \mathcal{G}^{+},\;
        (e_p, r_o, \cdot) \in \mathcal{G}^{+},\;
        r_s \not\equiv r_o \pmod{|\mathcal{R}|} \big\},

    i.e. :math:`e_p` is a tail of :math:`r_s` and a head of :math:`r_o`, and
    :math:`r_s`, :math:`r_o` are not the same relation up to inversion. Each
    ordered pair :math:`(r_s, r_o)` gets the count
    :math:`n(r_s, r_o) = |\{e_p : (r_s, e_p, r_o) \in \mathcal{C}\}|`. The
    :math:`P` pairs with :math:`n > 0` are ranked by count (descending);
    with :math:`k = \lceil \beta P \rceil` and :math:`c` the count of the
    :math:`k`-th pair, the kept pairs are all pairs with :math:`n \geq c`
    (ties at the cut-off are kept, so a little more than :math:`\beta P`
    pairs may be kept). :math:`\beta = 0` keeps nothing and
    :math:`\beta = 1` keeps every constraint. The kept constraints
    :math:`\mathcal{C}_\beta` give the undirected edges

    .. math::
        \mathcal{E}_{rf} = \bigcup_{(r_s, e_p, r_o) \in \mathcal{C}_\beta}
        \big\{ \{r_s, e_p\}, \{e_p, r_o\}, \{r_s, r_o\} \big\},

    where :math:`\{r_s, r_o\}` is added only with
    :obj:`relation_edges=True`, and only :math:`\{r_s, r_o\}` with
    :obj:`predicate_entities=False` (the paper's ablation without predicate
    entities). Both directions are stored, duplicates are collapsed and
    there are no self loops.

    Node layout (:obj:`rf_num_nodes` :math:`= |\mathcal{V}| +
    2|\mathcal{R}|` in every setting): entity :math:`i` is node :math:`i`,
    relation :math:`r` is node :math:`|\mathcal{V}| + r` and its inverse
    :math:`r^{-1}` is node :math:`|\mathcal{V}| + |\mathcal{R}| + r`.

    Only the training triples are read (:obj:`data.train_mask`, or another
    layout of :mod:`torch_wge.data.knowledge_graph`). On CoDEx-S, :obj:`beta=0.2` keeps 330 of
    1,638 pairs (cut-off count 47) and 59,744 of 71,756 constraints, which
    give 20,630 undirected relation-entity edges. The research code of the
    paper, whose runs gave the paper's numbers, never adds the
    :math:`\{r_s, r_o\}` edges, so they are off by default (the default of
    :class:`~torch_wge.training.TrainConfig` too); set
    :obj:`relation_edges=True` to add them.

    The view costs far more than a model forward pass on large graphs: pass
    the transform as :obj:`pre_transform` of a dataset (computed once and
    stored) rather than as :obj:`transform` (recomputed on every access).
    Its :meth:`__repr__` lists every parameter, so the datasets of
    :mod:`torch_wge.datasets` keep one processed copy per setting.

    Args:
        beta (float, optional): Fraction of the ranked :math:`(r_s, r_o)`
            pairs to keep, in :math:`[0, 1]`. (default: :obj:`0.2`)
        predicate_entities (bool, optional): If :obj:`False`, the predicate
            entities are left out and only the :math:`\{r_s, r_o\}` edges are
            added. (default: :obj:`True`)
        relation_edges (bool, optional): If :obj:`True`, the
            :math:`\{r_s, r_o\}` edges are added. (default: :obj:`False`)

    Returns the data as a :class:`~torch_wge.transforms.TwoViewData` with
    the view stored so that batches of graphs shift entities and relation
    nodes each by their own count:

        - :obj:`rf_entity_relation_index` (LongTensor :math:`(2, P)`: entity,
          relation node :math:`0, \ldots, 2|\mathcal{R}| - 1`; one column
          per undirected edge)
        - :obj:`rf_relation_relation_index` (LongTensor :math:`(2, Q)`)
        - :obj:`num_relation_nodes` (int, :math:`2|\mathcal{R}|`)

    and built from them on access, in the node layout above:

        - :obj:`rf_edge_index` (LongTensor :math:`(2, 2(P + Q))`, both
          directions, sorted by (row, column))
        - :obj:`rf_num_nodes` (int)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> # 0 -r0-> 1 -r1-> 2, with 3 entities and 2 relations
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 2]]),
        ...             edge_type=torch.tensor([0, 1]), num_nodes=3,
        ...             train_mask=torch.tensor([True, True]))
        >>> data = RelationFocusedTransform(beta=1.0)(data)
        >>> data.rf_num_nodes  # entities 0-2, r0, r1, r0^-1, r1^-1
        7
        >>> # constraints (r0, 1, r1) and (r1^-1, 1, r0^-1)
        >>> edge_index = data.rf_edge_index
        >>> edge_index[:, edge_index[0] < edge_index[1]].t().tolist()
        [[1, 3], [1, 4], [1, 5], [1, 6]]
        >>> # with relation_edges=True also r0 - r1 and r1^-1 - r0^-1
        >>> data = RelationFocusedTransform(beta=1.0, relation_edges=True)(data)
        >>> edge_index = data.rf_edge_index
        >>> edge_index[:, edge_index[0] < edge_index[1]].t().tolist()
        [[1, 3], [1, 4], [1, 5], [1, 6], [3, 4], [5, 6]]
    """

    def __init__(self, beta: float = 0.2, predicate_entities: bool = True, relation_edges: bool = False):
        self.beta = _check_beta(beta)
        self.predicate_entities = bool(predicate_entities)
        self.relation_edges = bool(relation_edges)
        if not self.predicate_entities and not self.relation_edges:
            raise ValueError(
                f"'{self.__class__.__name__}' with predicate_entities=False "
                f"and relation_edges=False would have no edges; enable one"
            )

    def forward(self, data: Data) -> TwoViewData:
        edge_index, _ = self.extract(data)
        num_nodes = int(data.num_nodes) + 2 * num_kg_relations(data)
        return add_view(data, RELATION_FOCUSED, edge_index, num_nodes, fingerprint=view_fingerprint(data))

    def extract(self, data: Data) -> Tuple[Tensor, RelationFocusedConstraints]:
        r"""The view's edges :math:`(2, |\mathcal{E}_{rf}|)` and the pair
        statistics they were chosen by (:func:`relation_focused_constraints`
        without the constraints), from one extraction."""
        graph = _ChunkedIncidences.of(data)
        selection = _select_pairs(graph, self.beta)
        N, R = int(data.num_nodes), graph.num_relations
        inc = graph.incidences
        src: List[Tensor] = []
        dst: List[Tensor] = []
        if self.predicate_entities and selection.num_kept_constraints > 0:
            in_used = torch.zeros(inc.entity.numel(), dtype=torch.bool)
            out_used = torch.zeros(inc.entity.numel(), dtype=torch.bool)
            for incoming, outgoing, _, kept in _kept_products(graph, selection):
                in_used[incoming[kept]] = True
                out_used[outgoing[kept]] = True
            # r_s - e_p for incoming incidences used by a kept constraint ...
            src.append(N + inc.relation[in_used])
            dst.append(inc.entity[in_used])
            # ... and e_p - r_o for outgoing ones (r_o = flip of relation).
            src.append(N + (inc.relation[out_used] + R) % (2 * R))
            dst.append(inc.entity[out_used])
        if self.relation_edges:
            pairs = selection.pairs[selection.pair_kept]
            src.append(N + pairs[:, 0])
            dst.append(N + pairs[:, 1])
        empty = torch.empty(0, dtype=torch.long)
        edge_index = undirected_edges(torch.cat(src or [empty]), torch.cat(dst or [empty]), N + 2 * R)
        return edge_index, selection

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(beta={self.beta}, "
            f"predicate_entities={self.predicate_entities}, "
            f"relation_edges={self.relation_edges})"
        )
