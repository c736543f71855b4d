r"""Where the graph views of WGE lie on a data object, and the data class
that batches them."""

from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data


class GraphView(NamedTuple):
    r"""The attributes that hold one graph view on a data object."""

    #: Attribute with the view's edges, :math:`(2, |\mathcal{E}|)`.
    edge_index: str
    #: Attribute with the number of nodes the edges index.
    num_nodes: str


#: :class:`~torch_wge.transforms.EntityFocusedTransform`: the entities.
ENTITY_FOCUSED = GraphView("ef_edge_index", "num_nodes")
#: :class:`~torch_wge.transforms.RelationFocusedTransform`: the entities, then
#: the relations, then the inverse relations.
RELATION_FOCUSED = GraphView("rf_edge_index", "rf_num_nodes")
#: :class:`~torch_wge.transforms.LeviGraphTransform`: the node layout of
#: :obj:`RELATION_FOCUSED`.
LEVI = GraphView("levi_edge_index", "levi_num_nodes")


class TwoViewData(Data):
    r"""A knowledge graph (:class:`~torch_geometric.data.Data` in the layout
    of :mod:`torch_wge.datasets`) with graph views added by
    :mod:`torch_wge.transforms`; what the transforms return.

    Each view indexes its own nodes: :obj:`ef_edge_index` the
    :obj:`num_nodes` entities, :obj:`rf_edge_index` and
    :obj:`levi_edge_index` the :obj:`rf_num_nodes` (:obj:`levi_num_nodes`)
    entity and relation nodes. :meth:`__inc__` tells PyG's batching so:
    :meth:`torch_geometric.data.Batch.from_data_list` (and the
    :class:`~torch_geometric.loader.DataLoader`) shifts each graph's view
    edges by the node count of that view in the graphs before it, which
    makes every view of the batch the disjoint union of the graphs' views.
    In the batch, the node-count attributes other than :obj:`num_nodes`
    hold one count per graph.

    Example:
        >>> from torch_geometric.data import Batch
        >>> data = TwoViewData(num_nodes=2, rf_num_nodes=4,
        ...                    rf_edge_index=torch.tensor([[0, 3], [3, 0]]))
        >>> Batch.from_data_list([data, data]).rf_edge_index
        tensor([[0, 3, 4, 7],
                [3, 0, 7, 4]])
    """

    @property
    def rf_node_type(self) -> Tensor:
        r"""The kind of each node of the relation-focused view,
        ``[rf_num_nodes]`` (summed over the graphs of a batch): 0 for an
        entity, 1 for a relation node. A single graph has its entities first
        (``[0] * N + [1] * M``); a batch has them graph by graph (the
        entities of graph 0, its relations, the entities of graph 1, ...).
        :class:`~torch_wge.nn.TwoViewConv` takes it to pair these nodes with
        its :obj:`x` (all entities) and :obj:`rel` (all relations) inputs.

        Example:
            >>> from torch_geometric.data import Batch
            >>> one = TwoViewData(num_nodes=2, rf_num_nodes=3)
            >>> two = TwoViewData(num_nodes=1, rf_num_nodes=3)
            >>> Batch.from_data_list([one, two]).rf_node_type
            tensor([0, 0, 1, 0, 1, 1])
        """
        return _view_node_type(self, RELATION_FOCUSED)

    @property
    def levi_node_type(self) -> Tensor:
        r"""As :attr:`rf_node_type`, for the Levi graph view."""
        return _view_node_type(self, LEVI)

    def __inc__(self, key: str, value: Any, *args, **kwargs) -> Any:
        for view in (RELATION_FOCUSED, LEVI):
            if key == view.edge_index:
                return self[view.num_nodes]
        return super().__inc__(key, value, *args, **kwargs)


def _view_node_type(data: Data, view: GraphView) -> Tensor:
    """0 for each entity, 1 for each relation node of ``view``, graph by graph."""
    if isinstance(data, Batch):
        entities = data.ptr.diff()
        view_nodes = torch.as_tensor(data[view.num_nodes]).view(-1)
    else:
        entities = torch.tensor([int(data.num_nodes)])
        view_nodes = torch.tensor([int(data[view.num_nodes])])
    counts = torch.stack([entities, view_nodes.to(entities.device) - entities], dim=1).view(-1)
    kinds = torch.tensor([0, 1], device=counts.device).repeat(entities.numel())
    return kinds.repeat_interleave(counts)


def add_view(data: Data, view: GraphView, edge_index: Tensor, num_nodes: Optional[int] = None) -> TwoViewData:
    r"""Returns :obj:`data` as a :class:`TwoViewData` (the same object if it
    is one already, else a shallow copy) with :obj:`edge_index` and, unless
    :obj:`None`, :obj:`num_nodes` stored in the attributes of :obj:`view`."""
    if not isinstance(data, TwoViewData):
        data = TwoViewData.from_dict(data.to_dict())
    data[view.edge_index] = edge_index
    if num_nodes is not None:
        data[view.num_nodes] = num_nodes
    return data


# Datasets store the class of their data; pre-transformed ones load safely.
torch.serialization.add_safe_globals([TwoViewData])
