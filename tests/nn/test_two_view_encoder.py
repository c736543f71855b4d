import pytest
import torch
from dense_two_view import randomize, tiny_kg_views, two_view_layer

from torch_wge.nn import TwoViewConv, TwoViewEncoder


@pytest.mark.parametrize("kwargs", [dict(), dict(relation_view=False), dict(entity_view=False), dict(quaternion=False)])
def test_stack_of_layers_matches_dense_equations(kwargs):
    torch.manual_seed(0)
    ef, rf = tiny_kg_views()
    encoder = TwoViewEncoder(8, num_layers=2, **kwargs).double()
    assert len(encoder.convs) == 2 and all(isinstance(conv, TwoViewConv) for conv in encoder.convs)
    for conv in encoder.convs:
        randomize(conv)
    encoder.eval()
    x, rel = torch.randn(5, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)
    states = encoder(x, rel, ef, rf)

    expected = [(x, rel)]
    for conv in encoder.convs:  # layer k + 1 reads layer k's entities and relations
        expected.append(two_view_layer(conv, *expected[-1], ef, rf))
    assert len(states) == 3
    for (got_x, got_r), (want_x, want_r) in zip(states, expected):
        assert torch.allclose(got_x, want_x, atol=1e-12)
        assert torch.allclose(got_r, want_r, atol=1e-12)


def test_new_state_dict_round_trip():
    encoder = TwoViewEncoder(8, 2)
    copy = TwoViewEncoder(8, 2)
    copy.load_state_dict(encoder.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(encoder.state_dict().values(), copy.state_dict().values()))


def test_errors_and_repr():
    ef, rf = tiny_kg_views()
    assert TwoViewEncoder(6, num_layers=1, quaternion=False)(torch.randn(5, 6), torch.randn(4, 6), ef, rf)[1][
        0
    ].shape == (
        5,
        6,
    )
    with pytest.raises(ValueError, match="multiple of 4"):
        TwoViewEncoder(6, num_layers=1)
    with pytest.raises(ValueError, match="num_layers >= 1"):
        TwoViewEncoder(8, num_layers=0)
    with pytest.raises(ValueError, match="no rf_edge_index"):
        TwoViewEncoder(8, num_layers=1)(torch.randn(5, 8), torch.randn(4, 8), ef)
    with pytest.raises(ValueError, match="at least one"):
        TwoViewEncoder(8, 1, entity_view=False, relation_view=False)
    assert repr(TwoViewEncoder(8, 2, relation_view=False)) == (
        "TwoViewEncoder(8, num_layers=2, layer=TwoViewConv(8, 8, entity_view=True, relation_view=False, quaternion=True))"
    )


def test_normalize_false_uses_each_views_edge_weights_as_given():
    torch.manual_seed(0)
    ef, rf = tiny_kg_views()
    layer = TwoViewConv(8, 8, normalize=False, norm=None).double()
    randomize(layer)
    x, rel = torch.randn(5, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)
    ef_weight, rf_weight = torch.rand(ef.size(1), dtype=torch.float64), torch.rand(rf.size(1), dtype=torch.float64)
    out_x, out_rel = layer(x, rel, ef, rf, ef_weight, rf_weight)
    dense = lambda e, w, n: torch.zeros(n, n, dtype=torch.float64).index_put_((e[1], e[0]), w, accumulate=True)
    h_ef = torch.tanh(dense(ef, ef_weight, 5) @ layer.entity_lin(x) + layer.entity_bias)
    h_rf = torch.tanh(dense(rf, rf_weight, 9) @ layer.relation_lin(torch.cat([x, rel])) + layer.relation_bias)
    torch.testing.assert_close(out_x, h_ef * h_rf[:5], rtol=0, atol=1e-12)
    torch.testing.assert_close(out_rel, h_rf[5:], rtol=0, atol=1e-12)


def test_seed_outputs_on_a_sampled_subgraph_equal_the_full_graphs():
    """A K-layer encoder on the K-hop neighbourhood of seed entities gives their full-graph outputs
    with the full graph's normalisation passed in as edge weights (normalize=False), or on the
    (K + 1)-hop neighbourhood; normalising the K-hop one itself does not (boundary degrees)."""
    import torch_geometric.transforms as T
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.utils import k_hop_subgraph, subgraph

    from torch_wge.testing import random_kg
    from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

    data = T.Compose([EntityFocusedTransform(), RelationFocusedTransform()])(random_kg(60, 3, 100, seed=5))
    n, m, num_layers = data.num_nodes, data.num_relation_nodes, 2
    torch.manual_seed(0)
    x, rel = torch.randn(n, 8, dtype=torch.float64), torch.randn(m, 8, dtype=torch.float64)
    encoder = TwoViewEncoder(8, num_layers).double()
    for conv in encoder.convs:
        randomize(conv)
    encoder.eval()
    presampled = TwoViewEncoder(8, num_layers, normalize=False).double().eval()
    presampled.load_state_dict(encoder.state_dict())
    full = encoder(x, rel, data.ef_edge_index, data.rf_edge_index)[-1][0]

    seeds = torch.tensor([0, 7, 31])
    both_views = torch.cat([data.ef_edge_index, data.rf_edge_index], dim=1)  # over entities, then relation nodes

    def on_subgraph(model, hops, normalized):
        nodes, _, _, _ = k_hop_subgraph(seeds, hops, both_views, num_nodes=n + m)
        entities, relations = nodes[nodes < n], nodes[nodes >= n] - n
        ef, ef_weight = (
            gcn_norm(data.ef_edge_index, None, n, dtype=x.dtype) if normalized else (data.ef_edge_index, None)
        )
        rf, rf_weight = (
            gcn_norm(data.rf_edge_index, None, n + m, dtype=x.dtype) if normalized else (data.rf_edge_index, None)
        )
        ef, ef_weight = subgraph(entities, ef, ef_weight, relabel_nodes=True, num_nodes=n)
        rf, rf_weight = subgraph(nodes, rf, rf_weight, relabel_nodes=True, num_nodes=n + m)
        out = model(x[entities], rel[relations], ef, rf, ef_weight, rf_weight)[-1][0]
        assert entities.numel() < n  # a proper subgraph
        return out[torch.searchsorted(entities, seeds)]

    torch.testing.assert_close(on_subgraph(presampled, num_layers, True), full[seeds], rtol=0, atol=1e-12)
    torch.testing.assert_close(on_subgraph(encoder, num_layers + 1, False), full[seeds], rtol=0, atol=1e-12)
    assert not torch.allclose(on_subgraph(encoder, num_layers, False), full[seeds], atol=1e-6)
