"""The single Levi-graph view of WGE's ablation study (variant 5)."""

import torch
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from torch_wge.transforms._utils import training_triples, undirected_edges
from torch_wge.transforms.views import LEVI, TwoViewData, add_view, view_fingerprint


class LeviGraphTransform(BaseTransform):
    r"""Adds the single Levi graph used in ablation (5) of
    `"Two-view Graph Neural Networks for Knowledge Graph Completion"
    <https://arxiv.org/abs/2112.09231>`_ (WGE) in place of the two views:
    one undirected graph over entity and relation nodes in which every
    training triple :math:`(h, r, t)` and its inverse
    :math:`(t, r^{-1}, h)` join their entities through the relation node.

    .. math::
        \mathcal{E}_{levi} = \bigcup_{(h, r, t) \in \mathcal{G}_{train}}
        \big\{ \{h, r\}, \{r, t\}, \{t, r^{-1}\}, \{r^{-1}, h\} \big\}

    The node layout is that of :class:`RelationFocusedTransform`
    (:obj:`levi_num_nodes` :math:`= |\mathcal{V}| + 2|\mathcal{R}|`): entity
    :math:`i` is node :math:`i`, relation :math:`r` is node
    :math:`|\mathcal{V}| + r` and its inverse is node
    :math:`|\mathcal{V}| + |\mathcal{R}| + r`. Both directions are stored,
    duplicates are collapsed; there are no self loops (every edge joins an
    entity and a relation node). Relation nodes are shared by all triples of
    their relation, so this is the Levi graph with relation types merged,
    not one node per triple. Only the triples selected by
    :obj:`data.train_mask` are read (see
    :mod:`torch_wge.data.knowledge_graph` for the other layouts).

    Returns the data as a :class:`~torch_wge.transforms.TwoViewData` with
    :obj:`levi_entity_relation_index` (LongTensor :math:`(2, P)`: entity,
    relation node :math:`0, \ldots, 2|\mathcal{R}| - 1`; one column per
    undirected edge), an empty :obj:`levi_relation_relation_index` and
    :obj:`num_relation_nodes`, from which it builds on access:

        - :obj:`levi_edge_index` (LongTensor :math:`(2, 2P)`,
          both directions, sorted by (row, column))
        - :obj:`levi_num_nodes` (int)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> data = Data(edge_index=torch.tensor([[0], [1]]),
        ...             edge_type=torch.tensor([0]), num_nodes=2,
        ...             train_mask=torch.tensor([True]))
        >>> data = LeviGraphTransform()(data)
        >>> data.levi_num_nodes  # entities 0, 1; r0 is node 2, r0^-1 node 3
        4
        >>> edge_index = data.levi_edge_index
        >>> edge_index[:, edge_index[0] < edge_index[1]].t().tolist()
        [[0, 2], [0, 3], [1, 2], [1, 3]]
    """

    def forward(self, data: Data) -> TwoViewData:
        head, rel, tail, R = training_triples(data)
        N = int(data.num_nodes)
        rel_node = N + rel
        inv_node = N + R + rel
        src = torch.cat([head, rel_node, tail, inv_node])
        dst = torch.cat([rel_node, tail, inv_node, head])
        edge_index = undirected_edges(src, dst, N + 2 * R)
        return add_view(data, LEVI, edge_index, N + 2 * R, fingerprint=view_fingerprint(data))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
