import inspect

import pytest
import torch
from torch_geometric.typing import WITH_TORCH_SPARSE, SparseTensor

from torch_wge.nn import QuaternionGCNConv
from torch_wge.utils.quaternion import quaternion_matrix


def dense_reference(conv, x, edge_index, edge_weight=None, add_self_loops=True):
    """float64: D^-1/2 (A + I) D^-1/2 (x ⊗ W) + b with a dense adjacency (messages flow j -> i)."""
    n = x.size(0)
    adj = torch.zeros(n, n, dtype=torch.float64)
    weight = torch.ones(edge_index.size(1), dtype=torch.float64) if edge_weight is None else edge_weight.double()
    adj.index_put_((edge_index[1], edge_index[0]), weight, accumulate=True)
    if add_self_loops:
        # gcn_norm adds a loop of weight 1 only where a node has none
        no_loop = adj.diagonal() == 0
        adj[no_loop.nonzero().view(-1), no_loop.nonzero().view(-1)] = 1.0
    deg = adj.sum(dim=1)
    d = torch.where(deg > 0, deg.pow(-0.5), torch.zeros_like(deg))
    norm_adj = d.view(-1, 1) * adj * d.view(1, -1)
    out = norm_adj @ (x.double() @ quaternion_matrix(conv.lin.weight.double()))
    return out + conv.bias.double() if conv.bias is not None else out


def random_graph(num_nodes, num_edges, seed, isolated=()):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(num_nodes, (2, num_edges), generator=gen)
    keep = ~(torch.isin(edge_index[0], torch.tensor(isolated)) | torch.isin(edge_index[1], torch.tensor(isolated)))
    edge_index = edge_index[:, keep & (edge_index[0] != edge_index[1])]
    return edge_index


def test_repr_and_shape():
    conv = QuaternionGCNConv(8, 16)
    assert str(conv) == "QuaternionGCNConv(8, 16)"
    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    assert conv(x, edge_index).shape == (4, 16)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_dense_float64(seed, weighted):
    torch.manual_seed(seed)
    edge_index = random_graph(9, 30, seed, isolated=(7,))
    edge_weight = torch.rand(edge_index.size(1)) + 0.1 if weighted else None
    conv = QuaternionGCNConv(8, 12)
    torch.nn.init.normal_(conv.bias)  # a non-zero bias must be added too
    x = torch.randn(9, 8)
    out = conv(x, edge_index, edge_weight)
    expected = dense_reference(conv, x, edge_index, edge_weight)
    assert torch.allclose(out.double(), expected, atol=1e-5)
    # the isolated node only sees itself: x_7 ⊗ W + b
    assert torch.allclose(
        out[7].double(), (x[7].double() @ quaternion_matrix(conv.lin.weight.double())) + conv.bias.double(), atol=1e-5
    )


def test_existing_self_loops_kept_and_no_self_loops_option():
    edge_index = torch.tensor([[0, 1, 1, 2, 2], [1, 0, 2, 1, 2]])  # node 2 has a loop already
    x = torch.randn(3, 4)
    conv = QuaternionGCNConv(4, 4)
    assert torch.allclose(conv(x, edge_index).double(), dense_reference(conv, x, edge_index), atol=1e-5)
    raw = QuaternionGCNConv(4, 4, add_self_loops=False, normalize=False, bias=False)
    weight = torch.rand(edge_index.size(1))
    assert raw.bias is None
    # unnormalised: plain weighted sum of neighbours' x ⊗ W
    adj = torch.zeros(3, 3)
    adj[edge_index[1], edge_index[0]] = weight
    assert torch.allclose(raw(x, edge_index, weight), adj @ (x @ raw.quaternion_matrix()), atol=1e-6)


def test_sparse_inputs_give_same_output():
    torch.manual_seed(0)
    edge_index = random_graph(10, 40, 3)
    edge_weight = torch.rand(edge_index.size(1))
    x = torch.randn(10, 8)
    conv = QuaternionGCNConv(8, 8)
    expected = conv(x, edge_index, edge_weight)
    adj = torch.sparse_coo_tensor(edge_index.flip(0), edge_weight, (10, 10)).coalesce()
    with pytest.warns(UserWarning, match="Converting sparse tensor to CSR"):  # PyG's advice on a COO input
        assert torch.allclose(conv(x, adj), expected, atol=1e-6)
    assert torch.allclose(conv(x, adj.to_sparse_csr()), expected, atol=1e-6)
    if WITH_TORCH_SPARSE:
        adj_t = SparseTensor(row=edge_index[1], col=edge_index[0], value=edge_weight, sparse_sizes=(10, 10))
        assert torch.allclose(conv(x, adj_t), expected, atol=1e-6)


def test_flow_target_to_source_with_flipped_edges():
    edge_index = random_graph(8, 20, 4)
    x = torch.randn(8, 4)
    conv = QuaternionGCNConv(4, 8)
    flipped = QuaternionGCNConv(4, 8, flow="target_to_source")
    flipped.load_state_dict(conv.state_dict())
    assert torch.allclose(conv(x, edge_index), flipped(x, edge_index.flip(0)), atol=1e-6)


def test_cached_is_gcn_convs_transductive_cache():
    from torch_geometric.nn import GCNConv

    graph_a, graph_b = random_graph(6, 12, 5), random_graph(6, 12, 7)
    x = torch.randn(6, 4, dtype=torch.float64)
    conv = QuaternionGCNConv(4, 4, cached=True).double()
    gcn = GCNConv(4, 4, cached=True).double()
    calls = []
    hook = conv.register_propagate_forward_pre_hook(lambda module, inputs: calls.append(inputs[0]))
    out_a = conv(x, graph_a)
    assert torch.allclose(out_a, dense_reference(conv, x, graph_a), atol=1e-12)
    # as GCNConv: the first graph's normalisation is used for every later call (transductive learning)
    gcn_a = gcn(x, graph_a)
    assert torch.equal(conv(x, graph_b), out_a) and torch.equal(gcn(x, graph_b), gcn_a)
    assert calls[1] is calls[0]
    # reset_parameters forgets it, as GCNConv's
    state = conv.state_dict()
    conv.reset_parameters()
    conv.load_state_dict(state)
    assert torch.allclose(conv(x, graph_b), dense_reference(conv, x, graph_b), atol=1e-12)
    # features of another dtype: the graph normalised again in that dtype, as by a fresh layer
    conv.float()
    fresh = QuaternionGCNConv(4, 4)
    fresh.load_state_dict(conv.state_dict())
    assert torch.equal(conv(x.float(), graph_b), fresh(x.float(), graph_b))
    assert conv._cached_edge_index[1].dtype == torch.float32
    hook.remove()


def test_sparse_gcn_norm_is_gcn_norm_of_the_edges_with_its_transpose():
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    from torch_wge.nn.conv.quaternion_gcn_conv import sparse_gcn_norm

    edge_index = random_graph(7, 20, 11)
    weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1
    index, norm = gcn_norm(edge_index, weight, 7, improved=True, dtype=torch.float64)
    expected = torch.zeros(7, 7, dtype=torch.float64).index_put_((index[1], index[0]), norm, accumulate=True)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), weight, (7, 7)).coalesce()
    for layout_adj_t in (adj_t, adj_t.to_sparse_csr()):
        got, transpose = sparse_gcn_norm(layout_adj_t, 7, True, True, torch.float64, transpose=True)
        assert got.layout == transpose.layout == torch.sparse_csr
        torch.testing.assert_close(got.to_dense(), expected, rtol=0, atol=1e-15)
        torch.testing.assert_close(transpose.to_dense(), expected.t(), rtol=0, atol=1e-15)
        alone, none = sparse_gcn_norm(layout_adj_t, 7, True, True, torch.float64, transpose=False)
        assert none is None and alone.layout == layout_adj_t.layout
        torch.testing.assert_close(alone.to_dense(), expected, rtol=0, atol=1e-15)
    without_loops, _ = sparse_gcn_norm(adj_t.to_sparse_csr(), 7, False, False, torch.float64, transpose=False)
    index, norm = gcn_norm(edge_index, weight, 7, add_self_loops=False, dtype=torch.float64)
    expected = torch.zeros(7, 7, dtype=torch.float64).index_put_((index[1], index[0]), norm, accumulate=True)
    torch.testing.assert_close(without_loops.to_dense(), expected, rtol=0, atol=1e-15)


def test_gcn_conv_options_and_defaults():
    from torch_geometric.nn import GCNConv

    # the constructor's options and defaults are GCNConv's
    ours = inspect.signature(QuaternionGCNConv.__init__).parameters
    theirs = inspect.signature(GCNConv.__init__).parameters
    assert [(p.name, p.default) for p in ours.values()] == [(p.name, p.default) for p in theirs.values()]
    conv = QuaternionGCNConv(4, 4, normalize=False)  # no self loops without normalisation, as GCNConv
    assert conv.add_self_loops is False
    # improved: A + 2I, against the dense reference with loops of weight 2
    edge_index = random_graph(6, 14, 8)
    x = torch.randn(6, 4, dtype=torch.float64)
    conv = QuaternionGCNConv(4, 8, improved=True).double()
    adj = torch.zeros(6, 6, dtype=torch.float64)
    adj.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.float64), accumulate=True)
    adj += 2 * torch.eye(6, dtype=torch.float64)
    d = adj.sum(1).pow(-0.5)
    expected = (d.view(-1, 1) * adj * d.view(1, -1)) @ (x @ conv.quaternion_matrix())
    # (gcn_norm weights the loops 2 when edge weights are given)
    assert torch.allclose(conv(x, edge_index, torch.ones(edge_index.size(1))), expected, atol=1e-12)


def test_lazy_in_channels():
    edge_index = random_graph(5, 10, 9)
    conv = QuaternionGCNConv(-1, 8)
    out = conv(torch.randn(5, 12), edge_index)
    assert out.shape == (5, 8) and conv.lin.weight.shape == (4, 3, 2)
    # a lazy layer takes a saved state dict too, sized by it
    lazy = QuaternionGCNConv(-1, 8)
    lazy.load_state_dict(conv.state_dict())
    x = torch.randn(5, 12)
    assert torch.equal(lazy(x, edge_index), conv(x, edge_index))


def test_cached_csr_adjacency_gradients_match_dense_float64():
    # a directed, weighted graph: the backward's cached transpose must be A^T, not A
    torch.manual_seed(0)
    edge_index = random_graph(9, 25, 6)
    edge_weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), edge_weight, (9, 9)).coalesce().to_sparse_csr()
    conv = QuaternionGCNConv(8, 12, cached=True).double()
    torch.nn.init.normal_(conv.bias)
    for _ in range(2):  # the first call fills the cache, the second reads it
        x = torch.randn(9, 8, dtype=torch.float64, requires_grad=True)
        upstream = torch.randn(9, 12, dtype=torch.float64)
        grads = torch.autograd.grad((conv(x, adj_t) * upstream).sum(), (x, conv.lin.weight))
        expected = dense_reference(conv, x, edge_index, edge_weight)
        expected_grads = torch.autograd.grad((expected * upstream).sum(), (x, conv.lin.weight))
        assert conv._cached_csr is not None  # the adjacency and its transpose
        for grad, reference in zip(grads, expected_grads):
            assert torch.allclose(grad, reference, atol=1e-10)


def test_gradcheck_float64():
    edge_index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    conv = QuaternionGCNConv(4, 8).double()
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)

    weight = conv.lin.weight.detach().clone().requires_grad_()
    bias = conv.bias.detach().clone().requires_grad_()

    def functional(x, weight, bias):
        return torch.func.functional_call(conv, {"lin.weight": weight, "bias": bias}, (x, edge_index))

    assert torch.autograd.gradcheck(functional, (x, weight, bias))


def test_channels_must_be_multiples_of_four():
    with pytest.raises(ValueError, match="in_channels must be a positive multiple of 4"):
        QuaternionGCNConv(6, 8)
    with pytest.raises(ValueError, match="out_channels"):
        QuaternionGCNConv(8, 10)
    with pytest.raises(ValueError, match="expected 8 input channels"):
        QuaternionGCNConv(8, 8)(torch.randn(3, 4), torch.tensor([[0], [1]]))


def test_trains_inside_a_pyg_node_classifier():
    """Two quaternion convs in an ordinary PyG model learn a node labelling."""
    torch.manual_seed(0)
    num_nodes = 40
    labels = torch.arange(num_nodes) % 2
    # two communities: edges mostly inside a class
    src = torch.randint(num_nodes, (200,))
    dst = torch.randint(num_nodes, (200,))
    keep = (labels[src] == labels[dst]) | (torch.rand(200) < 0.1)
    edge_index = torch.cat([torch.stack([src, dst])[:, keep], torch.stack([dst, src])[:, keep]], 1)
    x = torch.randn(num_nodes, 8) + labels.view(-1, 1) * 0.5

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = QuaternionGCNConv(8, 16)
            self.conv2 = QuaternionGCNConv(16, 4)
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x, edge_index):
            return self.head(self.conv2(torch.tanh(self.conv1(x, edge_index)), edge_index))

    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(60):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x, edge_index), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert (model(x, edge_index).argmax(1) == labels).float().mean() > 0.9


def test_torch_compile_fullgraph_matches_eager():
    edge_index = random_graph(7, 20, 6)
    x = torch.randn(7, 8)
    conv = QuaternionGCNConv(8, 8)
    compiled = torch.compile(conv, fullgraph=True)  # no graph break, as PyG's GCNConv
    assert torch.allclose(compiled(x, edge_index), conv(x, edge_index), atol=1e-6)


def func_grad_and_autograd(module, inputs, upstream):
    """The gradients of ``(module(*inputs) * upstream).sum()`` with respect to the parameters and
    ``inputs[0]``, by torch.func.grad over functional_call and by plain autograd."""
    params = {name: p.detach().clone() for name, p in module.named_parameters()}

    def scalar(p, x):
        out = torch.func.functional_call(module, p, (x, *inputs[1:]))
        return sum((o * u).sum() for o, u in zip(out, upstream)) if isinstance(out, tuple) else (out * upstream).sum()

    ours = torch.func.grad(scalar, argnums=(0, 1))(params, inputs[0])
    x = inputs[0].detach().clone().requires_grad_()
    out = module(x, *inputs[1:])
    loss = sum((o * u).sum() for o, u in zip(out, upstream)) if isinstance(out, tuple) else (out * upstream).sum()
    names = [name for name, p in module.named_parameters() if p.requires_grad]
    theirs = torch.autograd.grad(loss, [dict(module.named_parameters())[n] for n in names] + [x], allow_unused=True)
    expected = dict(zip(names, theirs[:-1]))
    for name in names:
        want = expected[name] if expected[name] is not None else torch.zeros_like(params[name])
        assert torch.allclose(ours[0][name], want, atol=1e-12), name
    assert torch.allclose(ours[1], theirs[-1], atol=1e-12)


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize(
    "options", [dict(), dict(improved=True), dict(add_self_loops=False), dict(normalize=False)], ids=str
)
def test_torch_func_grad_on_a_csr_adjacency_equals_autograd(cached, options):
    """Inside torch.func, which can neither make nor read a CSR matrix, the layer propagates the
    adjacency's edges: gradients (float64) equal autograd's on a weighted graph with self loops,
    the cache read when warm (another graph's, as GCNConv's cache) and never written there."""
    torch.manual_seed(0)
    edge_index = torch.cat([random_graph(9, 25, 6), torch.tensor([[2, 5], [2, 5]])], dim=1)  # two self loops
    edge_weight = torch.rand(edge_index.size(1), dtype=torch.float64) + 0.1
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), edge_weight, (9, 9)).coalesce().to_sparse_csr()
    other = torch.sparse_coo_tensor(edge_index, edge_weight, (9, 9)).coalesce().to_sparse_csr()
    conv = QuaternionGCNConv(8, 12, cached=cached, **options).double()
    torch.nn.init.normal_(conv.bias)
    x = torch.randn(9, 8, dtype=torch.float64)
    upstream = torch.randn(9, 12, dtype=torch.float64)
    func_grad_and_autograd(conv, (x, adj_t), upstream)  # autograd last: the cache filled by it alone
    assert (conv._cached_csr is not None) == (cached and conv.normalize)
    func_grad_and_autograd(conv, (x, other), upstream)  # a warm cache: the first graph's, both ways
