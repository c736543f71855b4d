"""Small tensor helpers shared by the graph-view transforms."""
from typing import Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data


def training_triples(data: Data) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Returns the heads, relations and tails of the training triples of
    :obj:`data` (all triples when it has no :obj:`train_mask`).

    Shapes:
        - **output:** three long tensors of shape :math:`(|E_{train}|)`
    """
    if data.edge_index is None or getattr(data, 'edge_type', None) is None:
        raise ValueError("graph-view transforms need 'edge_index' and "
                         "'edge_type' (one knowledge graph triple per edge)")
    if getattr(data, 'num_relations', None) is None:
        raise ValueError("graph-view transforms need 'num_relations' on the "
                         "data object")
    edge_index, edge_type = data.edge_index, data.edge_type
    mask = getattr(data, 'train_mask', None)
    if mask is not None:
        edge_index, edge_type = edge_index[:, mask], edge_type[mask]
    return edge_index[0], edge_type, edge_index[1]


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
    src, dst = src.long(), dst.long()
    lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
    keep = lo != hi
    key = torch.unique(lo[keep] * num_nodes + hi[keep])  # each pair once
    lo, hi = key // num_nodes, key % num_nodes
    key = torch.sort(torch.cat([key, hi * num_nodes + lo])).values
    return torch.stack([key // num_nodes, key % num_nodes], dim=0)
