import copy
import pickle
import warnings

import pytest
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


def _count_normalisations(monkeypatch):
    """The node counts of the adjacencies GCN-normalised from now on, counted at PyG's ``gcn_norm``
    as the layers' normalisation calls it (``edge_index`` tensors and sparse adjacencies alike)."""
    from torch_wge.nn.conv import quaternion_gcn_conv, two_view_conv

    counts = []

    def counting(norm):
        def gcn_norm(edge_index, edge_weight=None, num_nodes=None, *args, **kwargs):
            counts.append(num_nodes)
            return norm(edge_index, edge_weight, num_nodes, *args, **kwargs)

        return gcn_norm

    for module in (quaternion_gcn_conv, two_view_conv):  # sparse adjacencies, edge_index tensors
        monkeypatch.setattr(module, "gcn_norm", counting(module.gcn_norm))
    return counts


def test_a_training_loop_on_data_rf_edge_index_normalises_the_view_once(monkeypatch):
    from torch_wge.nn import TwoViewEncoder

    data = VIEWS(random_kg(12, 3, 40, seed=0))
    counts = _count_normalisations(monkeypatch)
    torch.manual_seed(0)
    encoder = TwoViewEncoder(8, num_layers=1, cached=True)
    x = torch.nn.Parameter(torch.randn(data.num_nodes, 8))
    rel = torch.nn.Parameter(torch.randn(data.num_relation_nodes, 8))
    optimizer = torch.optim.Adam([x, rel, *encoder.parameters()], lr=0.01)
    for _ in range(10):
        states = encoder(x, rel, data.ef_edge_index, data.rf_edge_index)
        loss = sum(h.square().mean() + r.square().mean() for h, r in states[1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert counts.count(data.rf_num_nodes) == 1  # the relation-focused view: 18 nodes
    assert counts.count(data.num_nodes) == 1  # the entity-focused view: 12 nodes


def fresh(data, view):
    """The view's edge_index built anew from the stored attributes of ``data``."""
    return getattr(TwoViewData.from_dict(data.to_dict()), view.edge_index)


@pytest.mark.parametrize("view", [RELATION_FOCUSED, LEVI], ids=lambda view: view.edge_index)
def test_the_kept_view_follows_a_change_of_its_pairs(view):
    data = VIEWS(random_kg(12, 3, 40, seed=0))
    built = getattr(data, view.edge_index)
    assert getattr(data, view.edge_index) is built and data[view.edge_index] is built
    # a pair changed in place
    pairs = getattr(data, view.entity_relation_index)
    pairs[1, 0] = (pairs[1, 0] + 1) % data.num_relation_nodes
    changed = getattr(data, view.edge_index)
    assert changed is not built and torch.equal(changed, fresh(data, view))
    assert getattr(data, view.edge_index) is changed
    # another tensor assigned (the same values: still built anew)
    setattr(data, view.entity_relation_index, pairs[:, 1:].clone())
    shorter = getattr(data, view.edge_index)
    assert shorter.size(1) == changed.size(1) - 2 and torch.equal(shorter, fresh(data, view))
    relation_pairs = getattr(data, view.relation_relation_index)
    setattr(data, view.relation_relation_index, relation_pairs.clone())
    assert getattr(data, view.edge_index) is not shorter
    # more entities move the relation nodes
    data.num_nodes = 13
    assert torch.equal(getattr(data, view.edge_index), fresh(data, view))
    # the kept tensor itself modified in place: built anew, not handed out modified
    kept = getattr(data, view.edge_index)
    kept[0, 0] = 99
    assert torch.equal(getattr(data, view.edge_index), fresh(data, view))


def test_the_kept_view_is_no_data_attribute(tmp_path):
    data = VIEWS(random_kg(12, 3, 40, seed=0))
    other = VIEWS(random_kg(9, 2, 30, seed=1))
    expected_batch = Batch.from_data_list([data, other])
    rf, levi = data.rf_edge_index, data.levi_edge_index
    assert "rf_edge_index" not in data.keys() and "rf_edge_index" not in data.to_dict()
    assert set(data.to_dict()) == set(VIEWS(random_kg(12, 3, 40, seed=0)).to_dict())
    # batches, copies and pickles as before; each builds its own view
    batch = Batch.from_data_list([data, other])
    assert set(batch.keys()) == set(expected_batch.keys())
    assert torch.equal(batch.rf_edge_index, expected_batch.rf_edge_index)
    assert batch.rf_edge_index is batch.rf_edge_index
    assert torch.equal(batch.get_example(0).levi_edge_index, levi)
    for original, copied in (
        (data, data.clone()),
        (data, copy.deepcopy(data)),
        (data, pickle.loads(pickle.dumps(data))),
        (batch, pickle.loads(pickle.dumps(batch))),
    ):
        assert set(copied.keys()) == set(original.keys())
        assert not any(isinstance(value, torch.Tensor) and value is rf for value in copied.__dict__.values())
    assert torch.equal(copy.deepcopy(data).rf_edge_index, rf) and copy.copy(data).rf_edge_index is rf
    assert "_built_rf_edge_index" not in data.__getstate__()
    torch.save(data, tmp_path / "data.pt")
    loaded = torch.load(tmp_path / "data.pt", weights_only=False)
    assert set(loaded.__dict__) == set(VIEWS(random_kg(12, 3, 40, seed=0)).__dict__)
    assert torch.equal(loaded.rf_edge_index, rf)
    # a processed dataset as the datasets store it: the stored attributes only
    InMemoryDataset.save([data], str(tmp_path / "processed.pt"))
    stored, _, _ = fs.torch_load(str(tmp_path / "processed.pt"))
    assert set(stored) == set(data.keys())
