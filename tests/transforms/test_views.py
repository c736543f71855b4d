import warnings

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data, InMemoryDataset
from torch_geometric.io import fs

from torch_wge.testing import random_kg
from torch_wge.transforms import (
    ENTITY_FOCUSED,
    LEVI,
    RELATION_FOCUSED,
    EntityFocusedTransform,
    LeviGraphTransform,
    RelationFocusedTransform,
    TwoViewData,
)

VIEWS = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5), LeviGraphTransform()])


def test_transforms_return_two_view_data_and_leave_input_alone():
    kg = random_kg(12, 3, 40, seed=0)
    for transform in (EntityFocusedTransform(), RelationFocusedTransform(), LeviGraphTransform(), VIEWS):
        out = transform(kg)
        assert type(out) is TwoViewData
        assert torch.equal(out.edge_index, kg.edge_index) and out.num_relations == kg.num_relations
    assert type(kg) is Data and "ef_edge_index" not in kg
    assert VIEWS(kg).rf_num_nodes == 12 + 2 * 3 and VIEWS(kg).levi_num_nodes == 12 + 2 * 3


def test_batch_shifts_each_view_by_its_own_node_count():
    first, second = VIEWS(random_kg(12, 3, 40, seed=0)), VIEWS(random_kg(9, 2, 30, seed=1))
    batch = Batch.from_data_list([first, second])
    assert batch.num_nodes == 12 + 9
    for view in (ENTITY_FOCUSED, RELATION_FOCUSED, LEVI):
        shift = first[view.num_nodes] if view.num_nodes != "num_nodes" else first.num_nodes
        expected = torch.cat([first[view.edge_index], second[view.edge_index] + shift], dim=1)
        assert torch.equal(batch[view.edge_index], expected), view
    assert batch.rf_num_nodes.tolist() == [18, 13]
    # the second graph's relation-focused edges start after the first's 18 nodes, not its 12 entities
    assert int(batch.rf_edge_index[:, first.rf_edge_index.size(1) :].min()) >= 18


def test_batch_of_the_same_graph_is_its_disjoint_union():
    data = VIEWS(random_kg(12, 3, 40, seed=0))
    batch = Batch.from_data_list([data, data])
    for view in (RELATION_FOCUSED, LEVI):
        n = data[view.num_nodes]
        adj = torch.zeros(2 * n, 2 * n)
        adj[batch[view.edge_index][0], batch[view.edge_index][1]] = 1
        one = torch.zeros(n, n)
        one[data[view.edge_index][0], data[view.edge_index][1]] = 1
        assert torch.equal(adj, torch.block_diag(one, one))
    assert batch.get_example(1).rf_edge_index.equal(data.rf_edge_index)


def test_stored_views_load_without_unsafe_unpickling(tmp_path):
    data = VIEWS(random_kg(12, 3, 40, seed=0))
    InMemoryDataset.save([data], str(tmp_path / "data.pt"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a weights_only failure warns and unpickles unsafely
        stored, _, cls = fs.torch_load(str(tmp_path / "data.pt"))
    assert cls is TwoViewData and torch.equal(stored["rf_edge_index"], data.rf_edge_index)


def _bad_graphs():
    """(description, graph, message) of knowledge graphs no view may be built from."""
    kg = random_kg(12, 3, 40, seed=0)

    def changed(**attrs):
        bad = kg.clone()
        for key, value in attrs.items():
            bad[key] = value
        return bad

    too_large = kg.edge_index.clone()
    too_large[1, 5] = 12
    negative = kg.edge_index.clone()
    negative[0, 3] = -1
    negative_type = kg.edge_type.clone()
    negative_type[7] = -2
    return [
        ("num_nodes below the largest id", changed(num_nodes=11), "node id 11, but the graph has num_nodes=11"),
        ("an id past num_nodes", changed(edge_index=too_large), "node id 12, but the graph has num_nodes=12"),
        ("a negative entity id", changed(edge_index=negative), "node id -1; ids must be >= 0"),
        ("a negative relation id", changed(edge_type=negative_type), "edge_type holds relation id -2"),
        ("float edge_index", changed(edge_index=kg.edge_index.float()), "edge_index must be an integer tensor"),
        ("float edge_type", changed(edge_type=kg.edge_type.float()), "edge_type must be an integer tensor"),
        ("3-row edge_index", changed(edge_index=torch.cat([kg.edge_index, kg.edge_index[:1]])), r"shape \[2, E\]"),
        ("short edge_type", changed(edge_type=kg.edge_type[:-1]), r"edge_type must have shape \[E\] = \[40\]"),
        ("int train_mask", changed(train_mask=kg.train_mask.long()), "train_mask must be a bool tensor"),
        ("no nodes", changed(num_nodes=0), "num_nodes >= 1"),
    ]


@pytest.mark.parametrize("transform", [EntityFocusedTransform(), RelationFocusedTransform(), LeviGraphTransform()])
@pytest.mark.parametrize("case", _bad_graphs(), ids=lambda case: case[0])
def test_transforms_refuse_graphs_whose_ids_do_not_fit(transform, case):
    _, graph, message = case
    with pytest.raises(ValueError, match=message):
        transform(graph)
