"""The entity-focused view of WGE (Tong et al., ESWC 2023, Section 3.1)."""

from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from torch_wge.transforms._utils import training_triples, undirected_edges
from torch_wge.transforms.views import ENTITY_FOCUSED, TwoViewData, add_view, view_fingerprint


class EntityFocusedTransform(BaseTransform):
    r"""Adds the entity-focused view of
    `"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_ (WGE) to a knowledge graph: a single
    undirected graph over the entities with an edge between the head and the
    tail of every training triple, relation types ignored.

    .. math::
        \mathcal{E}_{ef} = \big\{ \{h, t\} \;:\; (h, r, t) \in
        \mathcal{G}_{train},\ h \neq t \big\}

    Both directions of every edge are stored (as
    :func:`torch_geometric.utils.to_undirected` does), duplicates are
    collapsed and triples :math:`(h, r, h)` give no edge: no self loops are
    added (a GCN layer adds its own). Only the triples selected by
    :obj:`data.train_mask` are read (or :obj:`train_edge_index` in the
    layout of :class:`~torch_geometric.datasets.RelLinkPredDataset`), so
    validation and test triples never leak into the view; data without
    training triples is refused.

    The input is a :class:`~torch_geometric.data.Data` in one of the
    layouts of :mod:`torch_wge.data.knowledge_graph`, e.g.
    :obj:`edge_index` (head, tail), :obj:`edge_type`, :obj:`train_mask`,
    :obj:`num_nodes` (as :mod:`torch_wge.datasets` and PyG's
    :class:`~torch_geometric.datasets.WordNet18RR` store it). The transform
    returns it as a :class:`~torch_wge.transforms.TwoViewData` with

    - :obj:`ef_edge_index` (LongTensor :math:`(2, 2U)`): the undirected
      entity graph, sorted by (row, column), over the :obj:`num_nodes`
      entities.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> data = Data(edge_index=torch.tensor([[0, 1, 2], [1, 0, 2]]),
        ...             edge_type=torch.tensor([0, 1, 0]),
        ...             train_mask=torch.tensor([True, True, True]),
        ...             num_nodes=3, num_relations=2)
        >>> EntityFocusedTransform()(data).ef_edge_index
        tensor([[0, 1],
                [1, 0]])
    """

    def forward(self, data: Data) -> TwoViewData:
        head, _, tail, _ = training_triples(data)
        edge_index = undirected_edges(head, tail, data.num_nodes)
        return add_view(data, ENTITY_FOCUSED, edge_index, fingerprint=view_fingerprint(data))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
