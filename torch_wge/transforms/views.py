r"""Where the graph views of WGE lie on a data object, and the data class
that batches them."""

import weakref
from typing import Any, Dict, NamedTuple, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import sort_edge_index


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


#: :class:`~torch_wge.transforms.EntityFocusedTransform`: the entities.
ENTITY_FOCUSED = GraphView("ef_edge_index", "num_nodes")
#: :class:`~torch_wge.transforms.RelationFocusedTransform`: the entities, then
#: the relations, then the inverse relations.
RELATION_FOCUSED = GraphView("rf_edge_index", "rf_num_nodes", "rf_entity_relation_index", "rf_relation_relation_index")
#: :class:`~torch_wge.transforms.LeviGraphTransform`: the node layout of
#: :obj:`RELATION_FOCUSED`.
LEVI = GraphView("levi_edge_index", "levi_num_nodes", "levi_entity_relation_index", "levi_relation_relation_index")

#: The version of the attributes the views are stored in; a dataset's
#: processed folder is keyed by it, so a changed layout is never read from
#: an older cache.
STORAGE_VERSION = 2


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


def add_view(data: Data, view: GraphView, edge_index: Tensor, num_nodes: Optional[int] = None) -> TwoViewData:
    r"""Returns :obj:`data` as a :class:`TwoViewData` (the same object if it
    is one already, else a shallow copy) with the undirected view
    :obj:`edge_index` (both directions of each edge, no self loops) stored
    in the attributes of :obj:`view`. A view over entities and relation
    nodes takes :obj:`num_nodes`, the entities and the relation nodes, and
    is stored as its entity-relation and relation-relation pairs."""
    if not isinstance(data, TwoViewData):
        data = TwoViewData.from_dict(data.to_dict())
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
