"""Small tensor helpers shared by the graph-view transforms."""

from typing import Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected

from torch_wge.data import check_knowledge_graph, kg_triples, num_kg_relations


def training_triples(data: Data) -> Tuple[Tensor, Tensor, Tensor, int]:
    r"""Returns the heads, relations and tails of the training triples of
    :obj:`data` and the number of relations :math:`R`, in any layout of
    :mod:`torch_wge.data.knowledge_graph` (data without a :obj:`train_mask`
    is refused, never read as all-training), after
    :func:`~torch_wge.data.check_knowledge_graph`.

    Shapes:
        - **output:** three long tensors of shape :math:`(|E_{train}|)` and an int
    """
    check_knowledge_graph(data)
    head, rel, tail = kg_triples(data, "train").unbind(1)
    return head, rel, tail, num_kg_relations(data)


def undirected_edges(src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    r"""Builds an undirected simple graph from the node pairs
    :obj:`(src[i], dst[i])`: both directions are stored, duplicate pairs are
    collapsed and self loops are dropped. Edges are sorted by (row, column),
    as :func:`torch_geometric.utils.coalesce` sorts them.

    Shapes:
        - **input:** :obj:`src`, :obj:`dst` of shape :math:`(M)`
        - **output:** :math:`(2, 2U)` with :math:`U` the number of distinct
          unordered pairs :math:`\{u, v\}`, :math:`u \neq v`
    """
    edge_index, _ = remove_self_loops(torch.stack([src.long(), dst.long()]))
    return to_undirected(edge_index, num_nodes=num_nodes)
