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

from torch_wge.nn import TwoViewConv

VARIANTS = [
    dict(),
    dict(relation_view=False),
    dict(entity_view=False),
    dict(conv="gcn"),
    dict(batch_norm=False),
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
    assert layer.rf_conv is None and layer(x, rel, ef)[1] is rel  # relations pass through
    layer, x, rel = layer_and_inputs(8, 8, entity_view=False)
    layer.eval()
    assert layer.ef_conv is None
    out = layer(x, rel, None, rf)
    # entity 4 has no relation-focused edge: only its own W ⊗ x_4 + b reaches it
    alone = torch.tanh(layer.rf_norm(quaternion_weight_times(layer.rf_conv.weight, x[4:]) + layer.rf_conv.bias))
    assert torch.allclose(out[0][4:], alone, atol=1e-12)


def test_sparse_adjacency_matches_edge_index():
    layer, x, rel = layer_and_inputs()
    layer.eval()
    ef, rf = tiny_kg_views()
    csr = lambda e, n: torch.sparse_coo_tensor(e.flip(0), torch.ones(e.size(1)), (n, n)).to_sparse_csr()
    dense = layer(x, rel, ef, rf)
    sparse = layer(x, rel, csr(ef, 5).double(), csr(rf, 9).double())
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(dense, sparse))


def test_gradcheck():
    layer, x, rel = layer_and_inputs(4, 4)
    ef, rf = tiny_kg_views()
    x.requires_grad_(), rel.requires_grad_()
    assert torch.autograd.gradcheck(lambda x, rel: layer(x, rel, ef, rf), (x, rel), fast_mode=True)
    out_x, out_rel = layer(x, rel, ef, rf)
    grads = torch.autograd.grad(out_x.sum() + out_rel.sum(), list(layer.parameters()))
    assert all(g.abs().sum() > 0 for g in grads)  # every parameter takes part


def test_is_message_passing_with_reset_and_repr():
    layer = TwoViewConv(8, 16, entity_view=False)
    assert isinstance(layer, MessagePassing)
    assert isinstance(layer.rf_conv, MessagePassing)
    assert str(layer) == "TwoViewConv(8, 16, entity_view=False, relation_view=True, conv='quaternion')"
    with torch.no_grad():
        layer.rf_conv.bias.fill_(1.0)
        layer.rf_norm.running_mean.fill_(3.0)
    layer.reset_parameters()
    assert layer.rf_conv.bias.abs().sum() == 0 and layer.rf_norm.running_mean.abs().sum() == 0


def test_bad_arguments():
    ef, _ = tiny_kg_views()
    with pytest.raises(ValueError, match="conv must be one of"):
        TwoViewConv(8, 8, conv="gat")
    with pytest.raises(ValueError, match="at least one"):
        TwoViewConv(8, 8, entity_view=False, relation_view=False)
    with pytest.raises(ValueError, match="multiple of 4"):
        TwoViewConv(6, 8)
    with pytest.raises(ValueError, match="no rf_edge_index"):
        TwoViewConv(8, 8)(torch.randn(5, 8), torch.randn(4, 8), ef)


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


def test_propagate_forward_hook_sees_relation_focused_messages():
    layer, x, rel = layer_and_inputs(8, 8, batch_norm=False)
    ef, rf = tiny_kg_views()
    seen = []
    handle = layer.rf_conv.register_propagate_forward_hook(lambda module, inputs, out: seen.append(out))
    layer(x, rel, ef, rf)
    handle.remove()
    layer(x, rel, ef, rf)
    # one propagation over the 9 entity and relation nodes: Â_rf (W_rf ⊗ [x; rel])
    xr = torch.cat([x, rel])
    expected = normalized_adjacency(rf, 9) @ quaternion_weight_times(layer.rf_conv.weight, xr)
    assert len(seen) == 1 and torch.allclose(seen[0], expected, atol=1e-12)


class EntityFocusedModel(torch.nn.Module):
    """What an explainer calls: model(x, edge_index, **kwargs), edge_index the entity-focused view."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, edge_index, rel, rf_edge_index):
        return self.layer(x, rel, edge_index, rf_edge_index)[0]


def test_explainer_edge_mask_on_entity_focused_view():
    layer, x, rel = layer_and_inputs(8, 8)
    layer.eval()
    layer.rf_conv.explain = False  # the mask is sized for the entity-focused edges only
    ef, rf = tiny_kg_views()
    model = EntityFocusedModel(layer)

    # a zero edge mask removes every entity-focused message but the self
    # loops (normalised by the unmasked degrees); the relation-focused view is untouched
    set_masks(model, torch.zeros(ef.size(1), dtype=torch.float64), ef, apply_sigmoid=False)
    masked = model(x, ef, rel, rf)
    clear_masks(model)
    self_loops_only = torch.diag(normalized_adjacency(ef, 5).diagonal())
    h_rf = view_update(layer.rf_conv, layer.rf_norm, torch.cat([x, rel]), normalized_adjacency(rf, 9))
    expected = view_update(layer.ef_conv, layer.ef_norm, x, self_loops_only) * h_rf[:5]
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
