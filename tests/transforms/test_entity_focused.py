import pytest
import torch
from hand_kg import assert_simple_undirected, hand_kg, pairs

from torch_wge.testing import random_kg
from torch_wge.transforms import EntityFocusedTransform


def test_repr():
    assert str(EntityFocusedTransform()) == "EntityFocusedTransform()"


def test_hand_kg():
    # One edge {h, t} per training triple, relation types ignored:
    #   T1 (0, r0, 1) -> {0, 1}     T5 (1, r1, 4) -> {1, 4}
    #   T2 (3, r0, 1) -> {1, 3}     T6 (4, r2, 4) -> none (self loop)
    #   T3 (1, r1, 2) -> {1, 2}     T7 (0, r2, 1) -> {0, 1} again (collapsed)
    #   T4 (2, r2, 4) -> {2, 4}
    # The validation (5, r0, 2) and test (3, r1, 5) triples give nothing.
    data = EntityFocusedTransform()(hand_kg())
    assert pairs(data.ef_edge_index) == [(0, 1), (1, 2), (1, 3), (1, 4), (2, 4)]
    assert data.ef_edge_index.size(1) == 10
    assert_simple_undirected(data.ef_edge_index, 6)
    # Sorted by (row, column), like torch_geometric.utils.coalesce.
    row, col = data.ef_edge_index
    key = row * 6 + col
    assert torch.equal(key, key.sort().values)


def test_input_is_kept():
    data = hand_kg()
    edge_index = data.edge_index.clone()
    out = EntityFocusedTransform()(data)
    assert torch.equal(out.edge_index, edge_index)
    assert torch.equal(data.edge_index, edge_index)


def test_without_train_mask_is_refused():
    data = hand_kg()
    del data.train_mask
    with pytest.raises(ValueError, match="combine_splits"):
        EntityFocusedTransform()(data)


def test_brute_force_random():
    for seed in range(5):
        data = random_kg(num_entities=15, num_relations=3, num_triples=60, seed=seed)
        h, t = data.edge_index[:, data.train_mask].tolist()
        expected = {(min(a, b), max(a, b)) for a, b in zip(h, t) if a != b}
        out = EntityFocusedTransform()(data)
        assert pairs(out.ef_edge_index) == sorted(expected)
        assert_simple_undirected(out.ef_edge_index, data.num_nodes)


def test_empty_training_set():
    data = hand_kg()
    data.train_mask[:] = False
    out = EntityFocusedTransform()(data)
    assert out.ef_edge_index.shape == (2, 0)
