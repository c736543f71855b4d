"""Eqs. 4-7 of the WGE paper written out with dense float64 matrices: the
reference for TwoViewConv and TwoViewEncoder."""

import torch

from torch_wge.utils.quaternion import hamilton_product


def normalized_adjacency(edge_index, num_nodes):
    """D^-1/2 (A + I) D^-1/2 with A[i, j] = 1 for an edge j -> i."""
    adj = torch.eye(num_nodes, dtype=torch.float64)
    adj[edge_index[1], edge_index[0]] = 1.0
    d = adj.sum(1).pow(-0.5)
    return d.view(-1, 1) * adj * d.view(1, -1)


def quaternion_weight_times(weight, x):
    """W ⊗ x for each row x: output quaternion b is sum_a W[a, b] ⊗ x[a]."""
    n_in = weight.size(1)
    w = weight.permute(1, 2, 0)  # [n_in, n_out, 4]: the quaternion W[a, b]
    q = x.view(-1, 4, n_in).permute(0, 2, 1).unsqueeze(2)  # [N, n_in, 1, 4]
    out = hamilton_product(w, q).sum(dim=1)  # [N, n_out, 4]
    return out.permute(0, 2, 1).reshape(x.size(0), -1)


def batch_norm(norm, h):
    """BatchNorm1d from the batch (training) or the running statistics."""
    if norm.training:
        mean, var = h.mean(0), h.var(0, unbiased=False)
    else:
        mean, var = norm.running_mean.double(), norm.running_var.double()
    return (h - mean) / torch.sqrt(var + norm.eps) * norm.weight.double() + norm.bias.double()


def view_parts(layer, view):
    """The weight, bias and norm of one view ("ef" or "rf") of a TwoViewConv."""
    if view == "ef":
        return layer.entity_lin.weight, layer.entity_bias, layer.entity_norm
    return layer.relation_lin.weight, layer.relation_bias, layer.relation_norm


def view_update(layer, view, h, adj, act=torch.tanh):
    """Eqs. 4 and 6: g(BN(Â (W ⊗ h) + b)) of one view ("ef" or "rf"), g = tanh; W h for real weights."""
    weight, bias, norm = view_parts(layer, view)
    wh = quaternion_weight_times(weight.double(), h) if layer.quaternion else h @ weight.double().t()
    out = adj @ wh + bias.double()
    return act(batch_norm(norm, out) if norm is not None else out)


def two_view_layer(layer, x, rel, ef_edge_index, rf_edge_index, act=torch.tanh):
    """One layer: entities and relations of layer k + 1 from those of layer k."""
    x, rel = x.double(), rel.double()
    n = x.size(0)
    if layer.entity_view:  # Eq. 4: h'_ef
        h_ef = view_update(layer, "ef", x, normalized_adjacency(ef_edge_index, n), act)
    if layer.relation_view:  # Eq. 6: h'_rf over [entities; relations]
        a_rf = normalized_adjacency(rf_edge_index, n + rel.size(0))
        h_rf = view_update(layer, "rf", torch.cat([x, rel]), a_rf, act)
    if layer.entity_view and layer.relation_view:  # Eqs. 5 and 7
        return h_ef * h_rf[:n], h_rf[n:]
    if layer.entity_view:  # ablation 3: relations unchanged
        return h_ef, rel
    return h_rf[:n], h_rf[n:]  # ablation 4


def randomize(layer):
    """Non-zero biases and batch norm statistics and affine weights."""
    for bias in (layer.entity_bias, layer.relation_bias):
        if bias is not None:
            torch.nn.init.normal_(bias)
    for norm in (layer.entity_norm, layer.relation_norm):
        if norm is not None:
            norm.running_mean.normal_()
            norm.running_var.uniform_(0.5, 2.0)
            norm.weight.data.normal_()
            norm.bias.data.normal_()


def tiny_kg_views():
    """5 entities, 2 relations (relation nodes 5..8 in the relation-focused graph)."""
    ef = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    rf = torch.tensor([[0, 5, 1, 5, 1, 6, 3, 8, 5, 6], [5, 0, 5, 1, 6, 1, 8, 3, 6, 5]])
    return ef, rf
