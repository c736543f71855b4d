import pytest
import torch
from dense_two_view import (
    normalized_adjacency,
    quaternion_weight_times,
    randomize,
    tiny_kg_views,
    two_view_layer,
    view_update,
)
from torch_geometric.explain import Explainer, GNNExplainer
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
from torch_geometric.nn import MessagePassing, Sequential
from torch_geometric.typing import WITH_TORCH_SPARSE, SparseTensor

from torch_wge.nn import QuaternionLinear, TwoViewConv

VARIANTS = [
    dict(),
    dict(relation_view=False),
    dict(entity_view=False),
    dict(quaternion=False),
    dict(norm=None),
]


def layer_and_inputs(in_channels=8, out_channels=12, **kwargs):
    torch.manual_seed(0)
    layer = TwoViewConv(in_channels, out_channels, **kwargs).double()
    randomize(layer)
    x = torch.randn(5, in_channels, dtype=torch.float64)
    rel = torch.randn(4, in_channels, dtype=torch.float64)
    return layer, x, rel


@pytest.mark.parametrize("kwargs", VARIANTS)
@pytest.mark.parametrize("training", [False, True])
def test_matches_dense_equations(kwargs, training):
    layer, x, rel = layer_and_inputs(**kwargs)
    layer.train(training)
    ef, rf = tiny_kg_views()
    out_x, out_rel = layer(x, rel, ef, rf)
    want_x, want_rel = two_view_layer(layer, x, rel, ef, rf)
    assert out_x.shape == (5, 12)
    assert torch.allclose(out_x, want_x, atol=1e-12)
    assert torch.allclose(out_rel, want_rel, atol=1e-12)


def test_ablations_leave_out_a_view():
    ef, rf = tiny_kg_views()
    layer, x, rel = layer_and_inputs(8, 8, relation_view=False)
    assert layer.relation_lin is None and layer(x, rel, ef)[1] is rel  # relations pass through
    layer, x, rel = layer_and_inputs(8, 8, entity_view=False)
    layer.eval()
    assert layer.entity_lin is None and layer.entity_norm is None and layer.views == ("relation",)
    out = layer(x, rel, None, rf)
    # entity 4 has no relation-focused edge: only its own W ⊗ x_4 + b reaches it
    weight, bias = layer.relation_lin.weight, layer.relation_bias
    alone = torch.tanh(layer.relation_norm(quaternion_weight_times(weight, x[4:]) + bias))
    assert torch.allclose(out[0][4:], alone, atol=1e-12)


def test_sparse_adjacency_matches_edge_index():
    layer, x, rel = layer_and_inputs()
    layer.eval()
    ef, rf = tiny_kg_views()
    csr = lambda e, n: torch.sparse_coo_tensor(e.flip(0), torch.ones(e.size(1)), (n, n)).to_sparse_csr()
    dense = layer(x, rel, ef, rf)
    sparse = layer(x, rel, csr(ef, 5).double(), csr(rf, 9).double())
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(dense, sparse))


@pytest.mark.skipif(not WITH_TORCH_SPARSE, reason="torch_sparse is not installed (the sparse extra)")
def test_sparse_tensor_adjacency_matches_edge_index():
    layer, x, rel = layer_and_inputs()
    layer.eval()
    ef, rf = tiny_kg_views()
    adj = lambda e, n: SparseTensor(row=e[1], col=e[0], sparse_sizes=(n, n))
    got = layer(x, rel, adj(ef, 5), adj(rf, 9))
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(got, layer(x, rel, ef, rf)))


def test_cached_views_are_normalised_once_and_their_gradients_match_the_dense_equations(monkeypatch):
    from torch_wge.nn.conv import quaternion_gcn_conv

    normalised = []
    gcn_norm = quaternion_gcn_conv.gcn_norm
    monkeypatch.setattr(
        quaternion_gcn_conv, "gcn_norm", lambda adj, *args: normalised.append(adj.size(0)) or gcn_norm(adj, *args)
    )
    layer, x, rel = layer_and_inputs(cached=True)
    ef, rf = tiny_kg_views()
    csr = lambda e, n: torch.sparse_coo_tensor(e.flip(0), torch.ones(e.size(1)), (n, n)).to_sparse_csr().double()
    ef_adj, rf_adj = csr(ef, 5), csr(rf, 9)
    weights = [p for p in layer.parameters()]
    for _ in range(2):  # the second step reads both cached normalisations and their transposes
        out_x, out_rel = layer(x, rel, ef_adj, rf_adj)
        got = torch.autograd.grad(out_x.square().sum() + out_rel.pow(3).sum(), weights)
    assert sorted(normalised) == [5, 9] and sorted(layer._cached_csr) == ["entity", "relation"]
    want_x, want_rel = two_view_layer(layer, x, rel, ef, rf)
    want = torch.autograd.grad(want_x.square().sum() + want_rel.pow(3).sum(), weights)
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(got, want))
    layer.reset_parameters()  # forgets the cached adjacencies, as GCNConv's
    assert not layer._cached_csr


def test_gradcheck():
    layer, x, rel = layer_and_inputs(4, 4)
    ef, rf = tiny_kg_views()
    x.requires_grad_(), rel.requires_grad_()
    assert torch.autograd.gradcheck(lambda x, rel: layer(x, rel, ef, rf), (x, rel), fast_mode=True)
    out_x, out_rel = layer(x, rel, ef, rf)
    grads = torch.autograd.grad(out_x.sum() + out_rel.sum(), list(layer.parameters()))
    assert all(g.abs().sum() > 0 for g in grads)  # every parameter takes part


def test_one_message_passing_layer_with_its_own_parameters_reset_and_repr():
    layer = TwoViewConv(8, 16, entity_view=False)
    assert isinstance(layer, MessagePassing) and isinstance(layer.relation_lin, QuaternionLinear)
    assert layer.entity_lin is None and layer.entity_bias is None
    assert str(layer) == "TwoViewConv(8, 16, entity_view=False, relation_view=True, quaternion=True)"
    # no message-passing children: the layer propagates itself
    assert not any(isinstance(m, MessagePassing) for m in layer.modules() if m is not layer)
    assert sorted(name for name, _ in layer.named_parameters()) == [
        "relation_bias",
        "relation_lin.weight",
        "relation_norm.bias",
        "relation_norm.weight",
    ]
    with torch.no_grad():
        layer.relation_bias.fill_(1.0)
        layer.relation_norm.running_mean.fill_(3.0)
    layer.reset_parameters()
    assert layer.relation_bias.abs().sum() == 0 and layer.relation_norm.running_mean.abs().sum() == 0
    real = TwoViewConv(6, 10, quaternion=False)
    assert real.entity_lin.weight.shape == (10, 6) and not isinstance(real.entity_lin, QuaternionLinear)
    with pytest.raises(ValueError, match="has no 'entity' view"):
        layer.transform("entity", torch.randn(2, 8))


def test_act_and_norm_as_pyg_layers_take_them():
    layer, x, rel = layer_and_inputs(8, 8, act="relu", norm=None)
    ef, rf = tiny_kg_views()
    want_x, want_rel = two_view_layer(layer, x, rel, ef, rf, act=torch.relu)
    out_x, out_rel = layer(x, rel, ef, rf)
    assert torch.allclose(out_x, want_x, atol=1e-12) and torch.allclose(out_rel, want_rel, atol=1e-12)
    layer = TwoViewConv(8, 8, norm="layer_norm", act=torch.nn.LeakyReLU(0.3))
    assert type(layer.entity_norm).__name__ == "LayerNorm" and layer.entity_norm is not layer.relation_norm
    assert isinstance(layer.act, torch.nn.LeakyReLU)


def test_bad_arguments():
    ef, _ = tiny_kg_views()
    with pytest.raises(ValueError, match="at least one"):
        TwoViewConv(8, 8, entity_view=False, relation_view=False)
    with pytest.raises(ValueError, match="multiple of 4"):
        TwoViewConv(6, 8)
    with pytest.raises(ValueError, match="no rf_edge_index"):
        TwoViewConv(8, 8)(torch.randn(5, 8), torch.randn(4, 8), ef)
    with pytest.raises(TypeError):  # the deprecated names of quaternion and norm are gone
        TwoViewConv(8, 8, conv="gcn")


# ----------------------------------------------------- PyG message passing


def test_inside_pyg_sequential_with_another_layer():
    layer, x, rel = layer_and_inputs(8, 8)
    layer.eval()
    ef, rf = tiny_kg_views()
    lin = torch.nn.Linear(8, 3).double()
    model = Sequential(
        "x, rel, ef_edge_index, rf_edge_index",
        [
            (layer, "x, rel, ef_edge_index, rf_edge_index -> x, rel"),
            (lin, "x -> out"),
        ],
    )
    want_x, _ = two_view_layer(layer, x, rel, ef, rf)
    assert torch.allclose(model(x, rel, ef, rf), lin(want_x), atol=1e-12)


def test_propagate_forward_hook_sees_both_views():
    layer, x, rel = layer_and_inputs(8, 8, norm=None)
    ef, rf = tiny_kg_views()
    seen = []
    handle = layer.register_propagate_forward_hook(lambda module, inputs, out: seen.append(out))
    layer(x, rel, ef, rf)
    handle.remove()
    layer(x, rel, ef, rf)
    # one propagation over the 9 entity and relation nodes, Â_rf (W_rf ⊗ [x; rel]), then Â_ef (W_ef ⊗ x)
    xr = torch.cat([x, rel])
    expected_rf = normalized_adjacency(rf, 9) @ quaternion_weight_times(layer.relation_lin.weight, xr)
    expected_ef = normalized_adjacency(ef, 5) @ quaternion_weight_times(layer.entity_lin.weight, x)
    assert len(seen) == 2
    assert torch.allclose(seen[0], expected_rf, atol=1e-12) and torch.allclose(seen[1], expected_ef, atol=1e-12)


def test_get_num_hops_is_one_per_layer():
    from torch_geometric.utils import get_num_hops

    from torch_wge.nn import WGE, TwoViewEncoder

    # PyG counts message-passing modules: a layer reaches one hop in each view
    assert get_num_hops(TwoViewConv(8, 8)) == 1
    assert get_num_hops(TwoViewConv(8, 8, relation_view=False)) == 1
    for num_layers in (1, 2, 3):
        assert get_num_hops(TwoViewEncoder(8, num_layers=num_layers)) == num_layers
    assert get_num_hops(WGE(10, 2, hidden_channels=2, num_layers=3, views="levi")) == 3


class EntityFocusedModel(torch.nn.Module):
    """What an explainer calls: model(x, edge_index, **kwargs), edge_index the entity-focused view."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, edge_index, rel, rf_edge_index):
        return self.layer(x, rel, edge_index, rf_edge_index)[0]


def test_explainer_edge_mask_on_entity_focused_view():
    layer, x, rel = layer_and_inputs(8, 8)
    layer.eval()  # no flag to set: the mask is sized for the entity-focused edges and applies there only
    ef, rf = tiny_kg_views()
    model = EntityFocusedModel(layer)

    # a zero edge mask removes every entity-focused message but the self
    # loops (normalised by the unmasked degrees); the relation-focused view is untouched
    set_masks(model, torch.zeros(ef.size(1), dtype=torch.float64), ef, apply_sigmoid=False)
    masked = model(x, ef, rel, rf)
    clear_masks(model)
    self_loops_only = torch.diag(normalized_adjacency(ef, 5).diagonal())
    h_rf = view_update(layer, "rf", torch.cat([x, rel]), normalized_adjacency(rf, 9))
    expected = view_update(layer, "ef", x, self_loops_only) * h_rf[:5]
    assert torch.allclose(masked, expected, atol=1e-12)
    assert not torch.allclose(masked, model(x, ef, rel, rf), atol=1e-3)

    explainer = Explainer(
        model,
        algorithm=GNNExplainer(epochs=5),
        explanation_type="model",
        node_mask_type="attributes",
        edge_mask_type="object",
        model_config=dict(mode="regression", task_level="node", return_type="raw"),
    )
    explanation = explainer(x, ef, index=2, rel=rel, rf_edge_index=rf)
    assert explanation.edge_mask.shape == (ef.size(1),)
    assert explanation.node_mask.shape == x.shape
    # edges that cannot reach entity 2 in one hop get no mass
    far = (ef[1] != 2) & (ef[0] != 2)
    assert explanation.edge_mask[far].abs().sum() == 0 and explanation.edge_mask[~far].abs().sum() > 0


class RelationFocusedModel(torch.nn.Module):
    """The explained edge_index is the relation-focused view."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, edge_index, rel, ef_edge_index):
        return self.layer(x, rel, ef_edge_index, edge_index)[0]


def test_explainer_edge_mask_on_relation_focused_view():
    layer, x, rel = layer_and_inputs(8, 8, explain_view="relation")
    layer.eval()
    ef, rf = tiny_kg_views()
    model = RelationFocusedModel(layer)
    set_masks(model, torch.zeros(rf.size(1), dtype=torch.float64), rf, apply_sigmoid=False)
    masked = model(x, rf, rel, ef)
    clear_masks(model)
    self_loops_only = torch.diag(normalized_adjacency(rf, 9).diagonal())
    h_rf = view_update(layer, "rf", torch.cat([x, rel]), self_loops_only)
    expected = view_update(layer, "ef", x, normalized_adjacency(ef, 5)) * h_rf[:5]
    assert torch.allclose(masked, expected, atol=1e-12)
    # a mask that does not fit the view it is said to belong to is refused, not applied to other edges
    set_masks(model, torch.zeros(7, dtype=torch.float64), rf[:, :7], apply_sigmoid=False)
    with pytest.raises(ValueError, match="edge mask of 7 edges for the relation view"):
        model(x, rf, rel, ef)
    layer.explain_view = "entity"  # the relation-focused mask said to be the entity-focused view's
    set_masks(model, torch.zeros(rf.size(1), dtype=torch.float64), rf, apply_sigmoid=False)
    with pytest.raises(ValueError, match="edge mask of 10 edges for the entity view"):
        model(x, rf, rel, ef)
    clear_masks(model)
    with pytest.raises(ValueError, match="explain_view must be one of"):
        TwoViewConv(8, 8, explain_view="rf")


# ----------------------------------------------------- batches of graphs


def three_kgs_and_their_batch():
    """Three different random KGs with their views and float64 x, rel; their DataLoader batch."""
    import torch_geometric.transforms as T
    from torch_geometric.loader import DataLoader

    from torch_wge.testing import random_kg
    from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

    views = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(relation_edges=True)])
    graphs = [views(random_kg(n, r, 4 * n, seed=n)) for n, r in ((12, 2), (7, 3), (20, 1))]
    torch.manual_seed(0)
    for graph in graphs:
        graph.x = torch.randn(graph.num_nodes, 8, dtype=torch.float64)
        graph.rel = torch.randn(graph.num_relation_nodes, 8, dtype=torch.float64)
    return graphs, next(iter(DataLoader(graphs, batch_size=3)))


@pytest.mark.parametrize("kwargs", [dict(), dict(entity_view=False)])
def test_layer_on_a_dataloader_batch_equals_each_graph_by_dense_equations(kwargs):
    graphs, batch = three_kgs_and_their_batch()
    assert batch.rf_relation_relation_index.size(1) > 0  # relation-relation edges are shifted too
    layer = TwoViewConv(8, 8, **kwargs).double()
    randomize(layer)
    layer.eval()  # batch norm's running statistics: a graph's result does not depend on the others
    out_x, out_rel = layer(batch.x, batch.rel, batch.ef_edge_index, batch.rf_edge_index)
    want = [two_view_layer(layer, g.x, g.rel, g.ef_edge_index, g.rf_edge_index) for g in graphs]
    assert torch.allclose(out_x, torch.cat([x for x, _ in want]), atol=1e-12)
    assert torch.allclose(out_rel, torch.cat([rel for _, rel in want]), atol=1e-12)


def test_encoder_on_a_dataloader_batch_equals_each_graph_with_gradients():
    from torch_wge.nn import TwoViewEncoder

    graphs, batch = three_kgs_and_their_batch()
    encoder = TwoViewEncoder(8, num_layers=2).double()
    for conv in encoder.convs:
        randomize(conv)
    encoder.eval()

    def run(x, rel, data):
        return encoder(x, rel, data.ef_edge_index, data.rf_edge_index)[-1]

    x, rel = batch.x.clone().requires_grad_(), batch.rel.clone().requires_grad_()
    out_x, out_rel = run(x, rel, batch)
    (out_x.square().sum() + out_rel.pow(3).sum()).backward()
    alone = {name: [] for name in ("x", "rel", "x.grad", "rel.grad")}
    for graph in graphs:
        gx, grel = graph.x.clone().requires_grad_(), graph.rel.clone().requires_grad_()
        alone_x, alone_rel = run(gx, grel, graph)
        (alone_x.square().sum() + alone_rel.pow(3).sum()).backward()
        for name, value in zip(alone, (alone_x, alone_rel, gx.grad, grel.grad)):
            alone[name].append(value)
    for name, got in zip(alone, (out_x, out_rel, x.grad, rel.grad)):
        assert torch.allclose(got, torch.cat(alone[name]), atol=1e-12), name


def test_wge_refuses_a_batch_of_graphs():
    import torch_geometric.transforms as T
    from torch_geometric.data import Batch

    from torch_wge.nn import WGE
    from torch_wge.testing import random_kg
    from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

    views = T.Compose([EntityFocusedTransform(), RelationFocusedTransform()])
    batch = Batch.from_data_list([views(random_kg(10, 2, 30, seed=s)) for s in (0, 1)])
    with pytest.raises(ValueError, match="batch of 2 graphs"):
        WGE(20, 2, hidden_channels=2).graph_inputs(batch)


def test_torch_compile_fullgraph_matches_eager():
    layer, x, rel = layer_and_inputs(8, 8)
    layer.eval()
    ef, rf = tiny_kg_views()
    compiled = torch.compile(layer, fullgraph=True)
    for got, want in zip(compiled(x, rel, ef, rf), layer(x, rel, ef, rf)):
        assert torch.allclose(got, want, atol=1e-10)


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("kwargs", [dict(), dict(normalize=False), dict(quaternion=False)], ids=str)
def test_torch_func_grad_on_csr_adjacencies_equals_autograd(cached, kwargs):
    """Inside torch.func, which can neither make nor read a CSR matrix, each view propagates its
    adjacency's edges: float64 gradients of both outputs on the parameters and the inputs equal
    autograd's, from a cold cache (not written there) and a warm one."""
    layer, x, rel = layer_and_inputs(cached=cached, **kwargs)
    layer.eval()  # batch norm's running statistics are not updated in place inside torch.func
    ef, rf = tiny_kg_views()
    csr = lambda e, n: torch.sparse_coo_tensor(e.flip(0), torch.rand(e.size(1)) + 0.5, (n, n)).to_sparse_csr()
    ef_adj, rf_adj = csr(ef, 5).double(), csr(rf, 9).double()
    upstream = (torch.randn(5, 12, dtype=torch.float64), torch.randn(4, 12, dtype=torch.float64))
    params = {name: p.detach().clone() for name, p in layer.named_parameters()}

    def scalar(p, x, rel):
        out = torch.func.functional_call(layer, p, (x, rel, ef_adj, rf_adj))
        return sum((o * u).sum() for o, u in zip(out, upstream))

    for step in range(2):  # the second step with the cache autograd filled
        ours = torch.func.grad(scalar, argnums=(0, 1, 2))(params, x, rel)
        if step == 0:
            assert not layer._cached_csr  # read, never written inside torch.func
        inputs = [x.clone().requires_grad_(), rel.clone().requires_grad_()]
        out = layer(*inputs, ef_adj, rf_adj)
        names = list(params)
        expected = torch.autograd.grad(
            sum((o * u).sum() for o, u in zip(out, upstream)),
            [dict(layer.named_parameters())[n] for n in names] + inputs,
        )
        for name, want in zip(names, expected):
            assert torch.allclose(ours[0][name], want, atol=1e-12), name
        assert torch.allclose(ours[1], expected[-2], atol=1e-12) and torch.allclose(ours[2], expected[-1], atol=1e-12)
    assert sorted(layer._cached_csr) == (["entity", "relation"] if cached and layer.normalize else [])
