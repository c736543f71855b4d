import warnings

import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data, InMemoryDataset
from torch_geometric.io import fs

from torch_wge.testing import random_kg
from torch_wge.transforms import (
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


def batch_layout(graphs, view):
    """The view's edges of each graph moved by hand to the nodes of a batch: all
    entities graph by graph, then all relation nodes graph by graph."""
    num_entities = sum(g.num_nodes for g in graphs)
    edges, entities_before, relations_before = [], 0, 0
    for g in graphs:
        edge_index = getattr(g, view.edge_index)
        is_relation = edge_index >= g.num_nodes
        moved = torch.where(
            is_relation, edge_index - g.num_nodes + num_entities + relations_before, edge_index + entities_before
        )
        edges.append(moved)
        entities_before += g.num_nodes
        relations_before += g.num_relation_nodes
    return torch.cat(edges, dim=1), num_entities + relations_before


def edge_set(edge_index):
    return sorted(map(tuple, edge_index.t().tolist()))


def test_batch_shifts_entities_and_relation_nodes_each_by_their_own_count():
    graphs = [VIEWS(random_kg(12, 3, 40, seed=0)), VIEWS(random_kg(9, 2, 30, seed=1)), VIEWS(random_kg(5, 4, 20))]
    batch = Batch.from_data_list(graphs)
    assert batch.num_nodes == 12 + 9 + 5 and batch.num_relation_nodes.tolist() == [6, 4, 8]
    first, second = graphs[:2]
    expected = torch.cat([first.ef_edge_index, second.ef_edge_index + 12], dim=1)
    assert torch.equal(batch.ef_edge_index[:, : expected.size(1)], expected)
    pairs = torch.cat([first.rf_entity_relation_index, second.rf_entity_relation_index + torch.tensor([[12], [6]])], 1)
    assert torch.equal(batch.rf_entity_relation_index[:, : pairs.size(1)], pairs)
    for view in (RELATION_FOCUSED, LEVI):
        edge_index, num_nodes = batch_layout(graphs, view)
        assert getattr(batch, view.num_nodes) == num_nodes == 26 + 18
        assert edge_set(getattr(batch, view.edge_index)) == edge_set(edge_index), view
        for g, graph in enumerate(graphs):  # and back: each graph as it was
            assert torch.equal(getattr(batch.get_example(g), view.edge_index), getattr(graph, view.edge_index))


def test_single_graph_keeps_the_layout_entities_then_relation_nodes():
    data = VIEWS(random_kg(12, 3, 40, seed=0))
    rf = data.rf_edge_index
    assert data.rf_num_nodes == 18 and int(rf.max()) < 18
    assert ((rf[0] < 12) | (rf[1] < 12) | data.rf_relation_relation_index.numel() > 0).all()
    # both directions, sorted by (row, column), as the transform built them
    assert torch.equal(rf, RelationFocusedTransform(beta=0.5).extract(random_kg(12, 3, 40, seed=0))[0])
    assert data.rf_entity_relation_index.size(1) == rf.size(1) // 2


def test_stored_views_load_without_unsafe_unpickling(tmp_path):
    data = VIEWS(random_kg(12, 3, 40, seed=0))
    InMemoryDataset.save([data], str(tmp_path / "data.pt"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a weights_only failure warns and unpickles unsafely
        stored, _, cls = fs.torch_load(str(tmp_path / "data.pt"))
    assert cls is TwoViewData
    assert torch.equal(stored["rf_entity_relation_index"], data.rf_entity_relation_index)
