import pytest
import torch

from torch_wge.nn import TwoViewEncoder
from torch_wge.utils.quaternion import quaternion_matrix


def dense_norm_adj(edge_index, num_nodes):
    """D^-1/2 (A + I) D^-1/2 as a dense float64 matrix."""
    adj = torch.eye(num_nodes, dtype=torch.float64)
    adj[edge_index[1], edge_index[0]] = 1.0
    d = adj.sum(1).pow(-0.5)
    return d.view(-1, 1) * adj * d.view(1, -1)


def dense_layer(conv, norm, x, adj):
    """g(BN(Â (x ⊗ W) + b)) with BN in eval mode from its running statistics."""
    out = adj @ (x @ quaternion_matrix(conv.weight.double())) + conv.bias.double()
    if norm is not None:
        out = (out - norm.running_mean.double()) / torch.sqrt(norm.running_var.double() + norm.eps)
        out = out * norm.weight.double() + norm.bias.double()
    return torch.tanh(out)


def tiny_kg_views():
    # 5 entities, 2 relations (4 relation nodes 5..8 in the relation-focused graph)
    ef = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    rf = torch.tensor([[0, 5, 1, 5, 1, 6, 3, 8], [5, 0, 5, 1, 6, 1, 8, 3]])
    return ef, rf


def randomise_batch_norms(encoder):
    for norms in (encoder.ef_norms, encoder.rf_norms):
        for norm in norms or []:
            norm.running_mean.normal_()
            norm.running_var.uniform_(0.5, 2.0)
            norm.weight.data.normal_()
            norm.bias.data.normal_()


@pytest.mark.parametrize("entity_view,relation_view", [(True, True), (True, False), (False, True)])
def test_encoder_matches_dense_equations(entity_view, relation_view):
    torch.manual_seed(0)
    ef, rf = tiny_kg_views()
    encoder = TwoViewEncoder(8, num_layers=2, entity_view=entity_view, relation_view=relation_view)
    for conv in [*(encoder.ef_convs or []), *(encoder.rf_convs or [])]:
        torch.nn.init.normal_(conv.bias)
    randomise_batch_norms(encoder)
    encoder.eval()
    x, rel = torch.randn(5, 8), torch.randn(4, 8)
    states = encoder(x, rel, ef, rf)

    a_ef, a_rf = dense_norm_adj(ef, 5), dense_norm_adj(rf, 9)
    xk, rk = x.double(), rel.double()
    expected = [(xk, rk)]
    for k in range(2):
        # Eqs. 4-7 of the paper: both views read the layer-k entity states
        x_next = None
        if relation_view:
            xr = dense_layer(encoder.rf_convs[k], encoder.rf_norms[k], torch.cat([xk, rk]), a_rf)
            x_next, rk = xr[:5], xr[5:]
        if entity_view:
            x_ef = dense_layer(encoder.ef_convs[k], encoder.ef_norms[k], xk, a_ef)
            x_next = x_ef if x_next is None else x_ef * x_next
        xk = x_next
        expected.append((xk, rk))

    assert len(states) == 3
    for (got_x, got_r), (want_x, want_r) in zip(states, expected):
        assert torch.allclose(got_x.double(), want_x, atol=1e-5)
        assert torch.allclose(got_r.double(), want_r, atol=1e-5)
    if not relation_view:  # relations pass through unchanged
        assert all(torch.equal(r, rel) for _, r in states)


def test_sparse_adjacency_matches_edge_index():
    ef, rf = tiny_kg_views()
    encoder = TwoViewEncoder(8, num_layers=2).eval()
    x, rel = torch.randn(5, 8), torch.randn(4, 8)
    dense = encoder(x, rel, ef, rf)
    csr = lambda e, n: torch.sparse_coo_tensor(e.flip(0), torch.ones(e.size(1)), (n, n)).to_sparse_csr()
    sparse = encoder(x, rel, csr(ef, 5), csr(rf, 9))
    for (a, b), (c, d) in zip(dense, sparse):
        assert torch.allclose(a, c, atol=1e-6) and torch.allclose(b, d, atol=1e-6)


def test_gcn_variant_and_errors():
    ef, rf = tiny_kg_views()
    encoder = TwoViewEncoder(6, num_layers=1, conv="gcn")  # GCN needs no multiple of 4
    assert encoder(torch.randn(5, 6), torch.randn(4, 6), ef, rf)[1][0].shape == (5, 6)
    with pytest.raises(ValueError, match="multiple of 4"):
        TwoViewEncoder(6, num_layers=1)
    with pytest.raises(ValueError, match="no rf_edge_index"):
        TwoViewEncoder(8, num_layers=1)(torch.randn(5, 8), torch.randn(4, 8), ef)
    with pytest.raises(ValueError, match="at least one"):
        TwoViewEncoder(8, 1, entity_view=False, relation_view=False)
    assert "num_layers=2" in repr(TwoViewEncoder(8, 2))
