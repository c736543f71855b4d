r"""Where the graph views of WGE lie on a data object, and the data class
that batches them."""

import hashlib
import warnings
import weakref
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.utils import sort_edge_index

from torch_wge.data import check_edge_index, check_knowledge_graph, kg_triples, num_kg_relations


class GraphView(NamedTuple):
    r"""The attributes that hold one graph view on a data object."""

    #: Attribute with the view's edges, :math:`(2, |\mathcal{E}|)`, both
    #: directions of every undirected edge.
    edge_index: str
    #: Attribute with the number of nodes the edges index.
    num_nodes: str
    #: For a view over entities and relation nodes: the stored attribute of
    #: its entity-relation edges, :math:`(2, P)` pairs (entity, relation
    #: node), relation nodes numbered :math:`0, \ldots, 2|\mathcal{R}| - 1`
    #: in each graph, one column per undirected edge. :obj:`None` for the
    #: entity-focused view, stored as :obj:`edge_index` itself.
    entity_relation_index: Optional[str] = None
    #: The stored attribute of its relation-relation edges, :math:`(2, Q)`
    #: pairs of relation nodes (lower first), one column per undirected edge.
    relation_relation_index: Optional[str] = None
    #: The stored attribute (a python :obj:`int`; one per graph in a batch)
    #: holding the :func:`view_fingerprint` of the graph the view was built
    #: from, against which a reader checks the graph it is given.
    fingerprint: Optional[str] = None


#: :class:`~torch_wge.transforms.EntityFocusedTransform`: the entities.
ENTITY_FOCUSED = GraphView("ef_edge_index", "num_nodes", fingerprint="ef_fingerprint")
#: :class:`~torch_wge.transforms.RelationFocusedTransform`: the entities, then
#: the relations, then the inverse relations.
RELATION_FOCUSED = GraphView(
    "rf_edge_index", "rf_num_nodes", "rf_entity_relation_index", "rf_relation_relation_index", "rf_fingerprint"
)
#: :class:`~torch_wge.transforms.LeviGraphTransform`: the node layout of
#: :obj:`RELATION_FOCUSED`.
LEVI = GraphView(
    "levi_edge_index",
    "levi_num_nodes",
    "levi_entity_relation_index",
    "levi_relation_relation_index",
    "levi_fingerprint",
)
#: Every view of :mod:`torch_wge.transforms`.
GRAPH_VIEWS = (ENTITY_FOCUSED, RELATION_FOCUSED, LEVI)

#: The version of the attributes the views are stored in; a dataset's
#: processed folder is keyed by it, so a changed layout is never read from
#: an older cache.
STORAGE_VERSION = 3


class TwoViewData(Data):
    r"""A knowledge graph (:class:`~torch_geometric.data.Data` in the layout
    of :mod:`torch_wge.datasets`) with graph views added by
    :mod:`torch_wge.transforms`; what the transforms return.

    The entity-focused view is stored as :obj:`ef_edge_index` over the
    :obj:`num_nodes` entities. The relation-focused and Levi views, over
    entities and the :obj:`num_relation_nodes` :math:`= 2|\mathcal{R}|`
    relation nodes, are stored as their entity-relation pairs
    (:obj:`rf_entity_relation_index`, :obj:`levi_entity_relation_index`)
    and relation-relation pairs (:obj:`rf_relation_relation_index`), each
    numbering the relation nodes of its graph from 0. :meth:`__inc__` tells
    PyG's batching so: :meth:`torch_geometric.data.Batch.from_data_list`
    (and the :class:`~torch_geometric.loader.DataLoader`) shifts entities
    by the entities and relation nodes by the relation nodes of the graphs
    before them. :attr:`rf_edge_index` and :attr:`levi_edge_index` are
    built from these pairs at the first access and kept until the pairs
    change (another tensor assigned or a tensor modified in place), so that
    every access returns the same tensor and a cached normalisation of it
    (``cached=True`` of :class:`~torch_wge.nn.TwoViewConv`) is reused; the
    kept tensor is no data attribute (it is not batched, copied into
    :meth:`to_dict` or pickled). They hold both directions of each edge
    over the nodes :math:`[\mathbf{X}; \mathbf{R}]`, entity :math:`i` as
    node :math:`i` and relation node :math:`m` as node :math:`N + m`, with
    :math:`N` all entities and :math:`m` counted over all graphs of a batch,
    the layout in which :class:`~torch_wge.nn.TwoViewConv` takes its
    entities :obj:`x` and relation nodes :obj:`rel`.

    Example:
        >>> from torch_geometric.data import Batch
        >>> data = add_view(TwoViewData(num_nodes=2), RELATION_FOCUSED,
        ...                 torch.tensor([[0, 3], [3, 0]]), num_nodes=4)
        >>> data.rf_entity_relation_index  # entity 0 - relation node 1
        tensor([[0],
                [1]])
        >>> batch = Batch.from_data_list([data, data])
        >>> batch.rf_entity_relation_index
        tensor([[0, 2],
                [1, 3]])
        >>> batch.rf_edge_index  # nodes: entities 0-3, relation nodes 4-7
        tensor([[0, 2, 5, 7],
                [5, 7, 0, 2]])
    """

    @property
    def rf_edge_index(self) -> Optional[Tensor]:
        r"""The relation-focused view's edges :math:`(2, |\mathcal{E}_{rf}|)`
        over :attr:`rf_num_nodes` nodes (see the class), sorted by (row,
        column); :obj:`None` without the view."""
        return _view_edge_index(self, RELATION_FOCUSED)

    @property
    def rf_num_nodes(self) -> Optional[int]:
        r"""The number of nodes of :attr:`rf_edge_index`: all entities and
        relation nodes; :obj:`None` without the view."""
        return _view_num_nodes(self, RELATION_FOCUSED)

    @property
    def levi_edge_index(self) -> Optional[Tensor]:
        r"""As :attr:`rf_edge_index`, for the Levi graph view."""
        return _view_edge_index(self, LEVI)

    @property
    def levi_num_nodes(self) -> Optional[int]:
        r"""As :attr:`rf_num_nodes`, for the Levi graph view."""
        return _view_num_nodes(self, LEVI)

    def __getstate__(self) -> Dict[str, Any]:
        # the built views are derived data: not pickled (torch.save, multiprocessing)
        return {key: value for key, value in self.__dict__.items() if key not in _BUILT_CACHE_KEYS.values()}

    def __getitem__(self, key: str) -> Any:
        if key in _BUILT_ATTRIBUTES:  # data["rf_edge_index"] as data.rf_edge_index
            return getattr(self, key)
        return super().__getitem__(key)

    def __setattr__(self, key: str, value: Any) -> None:
        _refuse_built(self, key)
        super().__setattr__(key, value)

    def __setitem__(self, key: str, value: Any) -> None:
        _refuse_built(self, key)
        super().__setitem__(key, value)

    def validate(self, raise_on_error: bool = True) -> bool:
        r"""Validates the data as :meth:`torch_geometric.data.Data.validate`
        does, and every view on it: its ids within their counts (entities in
        :math:`[0, N)`, relation nodes in :math:`[0,` :obj:`num_relation_nodes`
        :math:`)`) and its graph the data's own (:func:`check_views`). A
        problem raises a :class:`ValueError` or, with
        :obj:`raise_on_error=False`, warns and makes the result :obj:`False`."""
        status = super().validate(raise_on_error)
        for problem in view_problems(self, [view for view in GRAPH_VIEWS if _has_view(self, view)]):
            status = False
            if raise_on_error:
                raise ValueError(problem)
            warnings.warn(problem, stacklevel=2)
        return status

    def __inc__(self, key: str, value: Any, *args, **kwargs) -> Any:
        for view in (RELATION_FOCUSED, LEVI):
            if key == view.entity_relation_index:
                return torch.tensor([[int(self.num_nodes)], [int(self.num_relation_nodes)]])
            if key == view.relation_relation_index:
                return int(self.num_relation_nodes)
        return super().__inc__(key, value, *args, **kwargs)


#: The attributes of :class:`TwoViewData` built from the stored pairs.
_BUILT_ATTRIBUTES = {name for view in (RELATION_FOCUSED, LEVI) for name in (view.edge_index, view.num_nodes)}


def _refuse_built(data: Data, key: str) -> None:
    # an assignment the built attribute would hide: refused, not ignored
    if key in _BUILT_ATTRIBUTES:
        raise AttributeError(
            f"'{data.__class__.__name__}.{key}' is built from the view's stored pairs; "
            f"set those (add_view stores a view's edge_index as them)"
        )


def _view_num_nodes(data: Data, view: GraphView) -> Optional[int]:
    if view.entity_relation_index is None or getattr(data, view.entity_relation_index, None) is None:
        return None
    return int(data.num_nodes) + int(torch.as_tensor(data.num_relation_nodes).sum())


#: Where a :class:`TwoViewData` keeps each built view (in its ``__dict__``, not in its storage).
_BUILT_CACHE_KEYS = {view.edge_index: f"_built_{view.edge_index}" for view in (RELATION_FOCUSED, LEVI)}


def _tensor_version(tensor: Optional[Tensor]) -> Optional[int]:
    try:
        return getattr(tensor, "_version", None)
    except RuntimeError:  # an inference tensor: no version counter, so never taken as unchanged
        return None


def _forgotten() -> None:
    return None


class _BuiltView:
    """A built view's edge_index and what it was built from: the pair tensors (weakly, so that
    replaced pairs are freed) with their versions, the node counts, and the result's version.
    Never changed once made; pickled and deep-copied as nothing (Batch pickles its ``__dict__``)."""

    __slots__ = ("sources", "counts", "edge_index", "version")

    def __init__(self, tensors: tuple, counts: tuple, edge_index: Tensor):
        self.sources = tuple((weakref.ref(tensor), _tensor_version(tensor)) for tensor in tensors)
        self.counts = counts
        self.edge_index = edge_index
        self.version = _tensor_version(edge_index)

    def __reduce__(self):
        return _forgotten, ()

    def fits(self, tensors: tuple, counts: tuple) -> bool:
        return (
            self.counts == counts
            and self.version is not None
            and self.version == _tensor_version(self.edge_index)
            and len(self.sources) == len(tensors)
            and all(
                ref() is tensor and version is not None and version == _tensor_version(tensor)
                for (ref, version), tensor in zip(self.sources, tensors)
            )
        )


def _view_edge_index(data: Data, view: GraphView) -> Optional[Tensor]:
    """Both directions of the stored pairs of ``view`` over ``[entities; relation nodes]``, sorted;
    built once and kept while the pairs and node counts stay as they were."""
    if view.entity_relation_index is None or view.relation_relation_index is None:
        return None
    entity_relation = getattr(data, view.entity_relation_index, None)
    if entity_relation is None:
        return None
    relation_relation = data[view.relation_relation_index]
    num_entities = int(data.num_nodes)
    num_nodes = _view_num_nodes(data, view)
    tensors, counts = (entity_relation, relation_relation), (num_entities, num_nodes)
    key = _BUILT_CACHE_KEYS[view.edge_index]
    built = data.__dict__.get(key)
    if isinstance(built, _BuiltView) and built.fits(tensors, counts):
        return built.edge_index
    entity_relation = entity_relation + torch.tensor([[0], [num_entities]], device=entity_relation.device)
    upper = torch.cat([entity_relation, relation_relation + num_entities], dim=1)
    edge_index = sort_edge_index(torch.cat([upper, upper.flip(0)], dim=1), num_nodes=num_nodes)
    # in __dict__ itself: Data's attribute assignment would store it as a data attribute
    data.__dict__[key] = _BuiltView(tensors, counts, edge_index)
    return edge_index


# Each triple (h, r, t) is mixed into two lanes, each a polynomial hash of (h, r, t) in the
# field of integers modulo the prime 2^31 - 1, shifted and raised to the 5th power (a permutation
# of the field, as 5 does not divide 2^31 - 2): products stay below 2^62 and the sum of a lane
# over up to 2^32 triples below 2^63, so that nothing overflows an int64.
_PRIME = (1 << 31) - 1
_LANES = ((0x2545F491, 0x4F6CDD1D, 0x1B873593), (0x5851F42D, 0x68E31DA4, 0x2127599B))


def _power5(x: Tensor) -> Tensor:
    square = x * x % _PRIME
    return square * square % _PRIME * x % _PRIME


def fingerprint_triples(triples: Tensor, num_nodes: int, num_relations: int) -> int:
    r"""An order-invariant fingerprint, in :math:`[0, 2^{63})`, of the
    triples :obj:`triples` :math:`(T, 3)` (head, relation, tail) of a graph
    of :obj:`num_nodes` entities and :obj:`num_relations` relations: the sum
    over the triples of a non-linear mix of each, digested with :math:`T`,
    :obj:`num_nodes` and :obj:`num_relations`. The same triples in another
    order (or on another device) give the same fingerprint; other triples,
    counts or node numberings give another but for a chance of about
    :math:`2^{-62}` (a guard against accidents, not against a graph crafted
    to collide). Costs a few integer operations per triple."""
    triples = triples.long().view(-1, 3) % _PRIME
    head, relation, tail = triples.unbind(1)
    sums = []
    for a, b, c in _LANES:
        x = ((head * a + relation) % _PRIME * b + tail) % _PRIME
        sums.append(int(_power5((x + c) % _PRIME).sum()))
    text = f"{triples.size(0)} {int(num_nodes)} {int(num_relations)} {sums[0]} {sums[1]}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") >> 1


def view_fingerprint(data: Data) -> int:
    r"""The fingerprint of what the views of :obj:`data` are built from:
    :func:`fingerprint_triples` of its training triples
    (:func:`~torch_wge.data.kg_triples`), its :obj:`num_nodes` and its
    number of relations (:func:`~torch_wge.data.num_kg_relations`). The
    transforms store it with each view (:attr:`GraphView.fingerprint`);
    :func:`check_views` compares it with the data it is given. Raises
    :class:`ValueError` unless :obj:`data` is a knowledge graph
    (:func:`~torch_wge.data.check_knowledge_graph`).

    Example:
        >>> from torch_wge.testing import random_kg
        >>> data = random_kg(10, 2, 30)
        >>> shuffled = data.edge_subgraph(torch.randperm(data.num_edges))
        >>> view_fingerprint(shuffled) == view_fingerprint(data)
        True
        >>> view_fingerprint(data.subgraph(torch.arange(9))) == view_fingerprint(data)
        False
    """
    check_knowledge_graph(data)
    return fingerprint_triples(kg_triples(data, "train"), int(data.num_nodes), num_kg_relations(data))


def _has_view(data: Data, view: GraphView) -> bool:
    stored = view.edge_index if view.entity_relation_index is None else view.entity_relation_index
    return getattr(data, stored, None) is not None


def _graph_fingerprints(data: Data) -> List[int]:
    # one per graph: a batch of several graphs is checked graph by graph
    if isinstance(data, Batch) and data.num_graphs > 1:
        return [view_fingerprint(data.get_example(g)) for g in range(data.num_graphs)]
    return [view_fingerprint(data)]


def _stored_fingerprints(data: Data, view: GraphView) -> Optional[List[int]]:
    value = getattr(data, view.fingerprint, None) if view.fingerprint is not None else None
    if isinstance(value, Tensor) and not value.is_floating_point() and value.dim() <= 1:
        return [int(v) for v in value.view(-1).tolist()]  # one per graph of a batch
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    return None


#: How every refusal of a view that does not fit its graph ends.
AFTER_THAT_OPERATION = "apply the view transforms (torch_wge.transforms) after that operation"


def _id_problem(name: str, ids: Tensor, what: str, count_name: str, count: int) -> Optional[str]:
    if ids.numel() == 0:
        return None
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        return f"{name} holds {what} id {low}; ids must be >= 0"
    if high >= count:
        return f"{name} holds {what} id {high}, but the graph has {count_name}={count} (ids 0..{count - 1})"
    return None


def _ids_problems(data: Data, view: GraphView) -> Iterator[str]:
    # the ids of the view within their counts: entities, then relation nodes
    num_nodes = int(data.num_nodes)
    try:
        check_edge_index(getattr(data, view.edge_index), int(getattr(data, view.num_nodes)), view.edge_index)
    except ValueError as error:
        yield str(error)
        return
    if view.entity_relation_index is None or view.relation_relation_index is None:
        return
    num_relation_nodes = int(torch.as_tensor(data.num_relation_nodes).sum())
    rows = [
        (view.entity_relation_index, 0, "entity", "num_nodes", num_nodes),
        (view.entity_relation_index, 1, "relation node", "num_relation_nodes", num_relation_nodes),
        (view.relation_relation_index, 0, "relation node", "num_relation_nodes", num_relation_nodes),
        (view.relation_relation_index, 1, "relation node", "num_relation_nodes", num_relation_nodes),
    ]
    for name, row, what, count_name, count in rows:
        problem = _id_problem(name, data[name][row], what, count_name, count)
        if problem is not None:
            yield problem
            return


def view_problems(data: Data, views: Iterable[GraphView]) -> Iterator[str]:
    r"""Why each view of :obj:`views` on :obj:`data` may not be read, one
    line each, lazily; views missing from :obj:`data` are skipped. A view is
    refused when its stored :attr:`GraphView.fingerprint` differs from
    :func:`view_fingerprint` of :obj:`data` now, i.e. when an operation
    changed the graph's training triples, entities or relations after the
    view transforms (for a batch, graph by graph), and when an id lies
    outside its count. See :func:`check_views`."""
    views = list(views)
    if not isinstance(data, Data):
        names = ", ".join(view.edge_index for view in views)
        yield (
            f"{names} cannot be read from a {type(data).__name__}: the views are built over one knowledge "
            f"graph as a torch_geometric.data.Data; {AFTER_THAT_OPERATION}, on a Data"
        )
        return
    current: Optional[List[int]] = None
    for view in views:
        if not _has_view(data, view):
            continue
        if view.fingerprint is not None:
            stored = _stored_fingerprints(data, view)
            if stored is None:
                yield (
                    f"{view.edge_index} holds no {view.fingerprint} (the fingerprint of the graph it was built "
                    f"from, which the transforms store with it), so it cannot be checked against the data's "
                    f"graph; apply the view transforms (torch_wge.transforms) to the graph as it is now"
                )
                continue
            if current is None:
                try:
                    current = _graph_fingerprints(data)
                except (ValueError, IndexError, RuntimeError) as error:
                    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
                    yield (
                        f"{view.edge_index} cannot be checked against the data's training triples ({reason}): "
                        f"an operation changed the graph after the view transforms; {AFTER_THAT_OPERATION}"
                    )
                    return
            if stored != current:
                yield (
                    f"{view.edge_index} was built from other training triples, entities or relations than the "
                    f"data holds now (an operation such as subgraph, edge_subgraph, RemoveIsolatedNodes or "
                    f"RandomLinkSplit changed the graph after the view transforms); {AFTER_THAT_OPERATION}"
                )
                continue
        yield from _ids_problems(data, view)


def check_views(data: Data, views: Iterable[GraphView]) -> None:
    r"""Raises a one-line :class:`ValueError` naming the first view of
    :obj:`views` on :obj:`data` that may not be read: one built from another
    graph than :obj:`data` now is (its fingerprint differs: the nodes or
    training triples were changed after the transforms, e.g. by
    :meth:`~torch_geometric.data.Data.subgraph`,
    :meth:`~torch_geometric.data.Data.edge_subgraph`,
    :class:`~torch_geometric.transforms.RemoveIsolatedNodes` or
    :class:`~torch_geometric.transforms.RandomLinkSplit`), or one whose ids
    do not fit its node counts. Views missing from :obj:`data` are skipped.
    Costs one pass over the training triples;
    :meth:`~torch_wge.nn.WGE.graph_inputs` and :meth:`TwoViewData.validate`
    call it.

    Example:
        >>> from torch_wge.testing import random_kg
        >>> from torch_wge.transforms import EntityFocusedTransform
        >>> data = EntityFocusedTransform()(random_kg(10, 2, 30))
        >>> check_views(data, [ENTITY_FOCUSED])  # as built: fine
        >>> check_views(data.subgraph(torch.arange(9)), [ENTITY_FOCUSED])
        Traceback (most recent call last):
        ...
        ValueError: ef_edge_index was built from other training triples, ... after that operation
    """
    for problem in view_problems(data, views):
        raise ValueError(problem)


def add_view(
    data: Data,
    view: GraphView,
    edge_index: Tensor,
    num_nodes: Optional[int] = None,
    fingerprint: Optional[int] = None,
) -> TwoViewData:
    r"""Returns :obj:`data` as a :class:`TwoViewData` (the same object if it
    is one already, else a shallow copy) with the undirected view
    :obj:`edge_index` (both directions of each edge, no self loops) stored
    in the attributes of :obj:`view`. A view over entities and relation
    nodes takes :obj:`num_nodes`, the entities and the relation nodes, and
    is stored as its entity-relation and relation-relation pairs.
    :obj:`fingerprint` is the :func:`view_fingerprint` of the graph the view
    was built from (the transforms pass it); a view stored without one is
    refused by :func:`check_views`."""
    if not isinstance(data, TwoViewData):
        data = TwoViewData.from_dict(data.to_dict())
    if view.fingerprint is not None:
        data[view.fingerprint] = None if fingerprint is None else int(fingerprint)  # None: a stale one removed
    if view.entity_relation_index is None or view.relation_relation_index is None:
        data[view.edge_index] = edge_index
        return data
    if num_nodes is None:
        raise ValueError(f"{view.edge_index} is over entities and relation nodes: add_view needs its num_nodes")
    num_entities = int(data.num_nodes)
    upper = edge_index[:, edge_index[0] < edge_index[1]] - num_entities  # entities are negative now
    entity_relation = upper[0] < 0
    data[view.entity_relation_index] = upper[:, entity_relation] + torch.tensor([[num_entities], [0]])
    data[view.relation_relation_index] = upper[:, ~entity_relation]
    data.num_relation_nodes = int(num_nodes) - num_entities
    return data


# Datasets store the class of their data; pre-transformed ones load safely.
torch.serialization.add_safe_globals([TwoViewData])
