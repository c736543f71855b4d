"""A small knowledge graph drawn by hand, shared by the transform tests.

Entities 0..5, relations r0, r1, r2 (R = 3); inverse relations r3 = r0^-1,
r4 = r1^-1, r5 = r2^-1. In the two-node-type views (N = 6) relation r is
node 6 + r:  r0 -> 6, r1 -> 7, r2 -> 8, r3 -> 9, r4 -> 10, r5 -> 11.

Training triples (h, r, t):
    T1 (0, r0, 1)      T5 (1, r1, 4)
    T2 (3, r0, 1)      T6 (4, r2, 4)   a self loop
    T3 (1, r1, 2)      T7 (0, r2, 1)   same entity pair as T1
    T4 (2, r2, 4)
Validation: (5, r0, 2); test: (3, r1, 5) -- entity 5 only occurs there.
"""

import torch
from torch_geometric.data import Data

N, R = 6, 3
TRAIN = [(0, 0, 1), (3, 0, 1), (1, 1, 2), (2, 2, 4), (1, 1, 4), (4, 2, 4), (0, 2, 1)]
VALID = [(5, 0, 2)]
TEST = [(3, 1, 5)]


def hand_kg() -> Data:
    triples = torch.tensor(TRAIN + VALID + TEST)
    split = torch.tensor([0] * len(TRAIN) + [1] * len(VALID) + [2] * len(TEST))
    return Data(
        edge_index=triples[:, [0, 2]].t().contiguous(),
        edge_type=triples[:, 1].contiguous(),
        train_mask=split == 0,
        val_mask=split == 1,
        test_mask=split == 2,
        num_nodes=N,
        num_relations=R,
    )


def pairs(edge_index: torch.Tensor) -> list:
    """The undirected edges {u, v} (u < v) of a symmetric edge_index, sorted."""
    return sorted(map(tuple, edge_index[:, edge_index[0] < edge_index[1]].t().tolist()))


def assert_simple_undirected(edge_index: torch.Tensor, num_nodes: int) -> None:
    """Symmetric, no self loops, no duplicate edges, ids in range."""
    assert edge_index.dtype == torch.long and edge_index.dim() == 2
    assert edge_index.size(0) == 2
    edges = list(map(tuple, edge_index.t().tolist()))
    assert len(edges) == len(set(edges)), "duplicate edges"
    assert all(u != v for u, v in edges), "self loops"
    assert set(edges) == {(v, u) for u, v in edges}, "not symmetric"
    if edges:
        assert 0 <= int(edge_index.min()) and int(edge_index.max()) < num_nodes
