"""The layers where PyG's go: a fresh layer's output after state changes and copies (no stale
cache), torch.jit.script, float16 / bfloat16 with CSR adjacencies on the CPU and CUDA, and second-order
gradients through the cached CSR product."""

import copy
import io
import pickle

import pytest
import torch
from dense_two_view import randomize, tiny_kg_views, two_view_layer

from torch_wge.nn import QuaternionGCNConv, QuaternionLinear, TwoViewConv, TwoViewEncoder

# torch 2.13 marks torch.jit.script deprecated; PyG's layers and these still support it
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script.*` is deprecated:DeprecationWarning",
    "ignore:Sparse CSR tensor support is in beta state",
)

EF, RF = tiny_kg_views()
X = torch.randn(5, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
REL = torch.randn(4, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
EF_WEIGHT = torch.rand(EF.size(1), generator=torch.Generator().manual_seed(2), dtype=torch.float64) + 0.5


def csr(edge_index, num_nodes, weight=None, dtype=torch.float64):
    """The transposed adjacency of ``edge_index`` as a ``torch.sparse_csr`` tensor."""
    weight = (
        torch.ones(edge_index.size(1), dtype=dtype, device=edge_index.device) if weight is None else weight.to(dtype)
    )
    return torch.sparse_coo_tensor(edge_index.flip(0), weight, (num_nodes, num_nodes)).coalesce().to_sparse_csr()


def make(kind, **kwargs):
    """A float64 layer of ``kind`` with non-trivial parameters, and how to call it on the tiny KG."""
    torch.manual_seed(3)
    if kind == "gcn":
        layer = QuaternionGCNConv(8, 12, **kwargs).double()
        if layer.bias is not None:
            torch.nn.init.normal_(layer.bias)
        return layer
    layer = TwoViewConv(8, 8, **kwargs) if kind == "two_view" else TwoViewEncoder(8, num_layers=2, **kwargs)
    for conv in [layer] if kind == "two_view" else layer.convs:
        if kwargs.get("norm", "batch_norm") == "batch_norm":
            randomize(conv)  # biases and batch norms
        else:
            for bias in (conv.entity_bias, conv.relation_bias):
                if bias is not None:
                    torch.nn.init.normal_(bias)
    return layer.double().eval()


def run(layer, kind, sparse, dtype=torch.float64, device="cpu"):
    """The layer's output on the tiny KG (edge_index or CSR adjacencies), as one tensor."""
    x, rel, ef_index, rf_index = X.to(device, dtype), REL.to(device, dtype), EF.to(device), RF.to(device)
    if kind == "gcn":
        weight = EF_WEIGHT.to(device, dtype)
        return layer(x, csr(ef_index, 5, weight, dtype)) if sparse else layer(x, ef_index, weight)
    ef, rf = (csr(ef_index, 5, dtype=dtype), csr(rf_index, 9, dtype=dtype)) if sparse else (ef_index, rf_index)
    out = layer(x, rel, ef, rf)
    return torch.cat(out) if kind == "two_view" else torch.cat([torch.cat(state) for state in out])


def fresh_output(layer, kind, sparse, **kwargs):
    """What a new layer with ``layer``'s parameters and buffers gives."""
    fresh = make(kind, **kwargs).to(next(layer.parameters()).dtype)
    fresh.load_state_dict(layer.state_dict())
    return run(fresh, kind, sparse, next(layer.parameters()).dtype)


def round_trips(layer):
    """A deep copy and a pickled copy of ``layer`` (and one through torch.save)."""
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    return [copy.deepcopy(layer), pickle.loads(pickle.dumps(layer)), torch.load(buffer, weights_only=False)]


CASES = [
    (kind, cached, sparse)
    for kind in ("gcn", "two_view", "encoder")
    for cached in (False, True)
    for sparse in (False, True)
]


@pytest.mark.parametrize("kind, cached, sparse", CASES)
def test_a_changed_or_copied_layer_gives_a_fresh_layers_output(kind, cached, sparse):
    layer = make(kind, cached=cached)

    def assert_fresh(module):
        torch.testing.assert_close(
            run(module, kind, sparse), fresh_output(module, kind, sparse, cached=cached), rtol=0, atol=1e-12
        )

    for copied in round_trips(layer):  # before a forward
        assert_fresh(copied)
    assert_fresh(layer)  # the first forward; a cached layer keeps its adjacencies from here on
    for copied in round_trips(layer):  # after a forward, with the caches filled
        assert_fresh(copied)
    with torch.no_grad():  # in-place edits of the parameters
        for parameter in layer.parameters():
            parameter.mul_(1.5).add_(0.1)
    assert_fresh(layer)
    other = make(kind, cached=cached)
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.normal_()
    layer.load_state_dict(other.state_dict())
    assert_fresh(layer)
    # moved to another dtype and back: computed in that dtype, as by a fresh layer
    layer.float()
    torch.testing.assert_close(
        run(layer, kind, sparse, torch.float32), fresh_output(layer, kind, sparse, cached=cached), rtol=0, atol=0
    )
    layer.double()
    assert_fresh(layer)
    layer.reset_parameters()
    assert_fresh(layer)


# ------------------------------------------------------------------------- TorchScript


@pytest.mark.parametrize("bias", [True, False])
def test_script_quaternion_linear_matches_eager(bias):
    lin = QuaternionLinear(8, 12, bias=bias).double()
    x = torch.randn(6, 8, dtype=torch.float64)
    torch.testing.assert_close(torch.jit.script(lin)(x), lin(x), rtol=0, atol=0)


@pytest.mark.parametrize("kwargs", [dict(), dict(cached=True), dict(improved=True, bias=False)])
def test_script_quaternion_gcn_conv_matches_eager(kwargs):
    from torch_geometric.nn import GCNConv

    torch.jit.script(GCNConv(8, 12, **kwargs))  # as PyG's GCNConv
    conv = make("gcn", **kwargs)
    scripted = torch.jit.script(conv)
    for _ in range(2):  # a cached layer's second call reads its cache
        torch.testing.assert_close(scripted(X, EF, EF_WEIGHT), conv(X, EF, EF_WEIGHT), rtol=0, atol=1e-14)
        torch.testing.assert_close(scripted(X, EF), conv(X, EF), rtol=0, atol=1e-14)
    raw = QuaternionGCNConv(8, 12, normalize=False).double()
    torch.testing.assert_close(torch.jit.script(raw)(X, EF, EF_WEIGHT), raw(X, EF, EF_WEIGHT), rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(cached=True),
        dict(relation_view=False),
        dict(entity_view=False),
        dict(quaternion=False),
        dict(norm=None, act="relu"),
        dict(norm="layer_norm"),
    ],
)
def test_script_two_view_conv_and_encoder_match_eager(kwargs):
    layer = make("two_view", **kwargs)
    scripted = torch.jit.script(layer)
    ef = EF if layer.entity_view else None
    rf = RF if layer.relation_view else None
    for _ in range(2):
        for got, want in zip(scripted(X, REL, ef, rf), layer(X, REL, ef, rf)):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-14)
    encoder = make("encoder", **kwargs)
    scripted = torch.jit.script(encoder)
    for got, want in zip(scripted(X, REL, ef, rf), encoder(X, REL, ef, rf)):
        torch.testing.assert_close(torch.cat(got), torch.cat(want), rtol=0, atol=1e-14)


# ------------------------------------------- float16 and bfloat16 on the CPU and on CUDA

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("kind", ["gcn", "two_view", "encoder"])
def test_half_types_with_csr_inputs_give_the_edge_index_result(kind, cached, dtype, device):
    # torch has no CPU CSR matmul for these types: the layers multiply in float32 and round back
    layer = make(kind, cached=cached)
    reference = run(layer, kind, sparse=False)  # float64 on the CPU
    layer.to(device, dtype)
    tolerance = 4e-2 if dtype == torch.bfloat16 else 5e-3  # of outputs of size ~1
    for _ in range(2):
        with_csr, with_edges = run(layer, kind, True, dtype, device), run(layer, kind, False, dtype, device)
        assert with_csr.dtype == with_edges.dtype == dtype and with_csr.device.type == device
        torch.testing.assert_close(with_csr.cpu().double(), reference, rtol=tolerance, atol=tolerance)
        torch.testing.assert_close(with_edges.cpu().double(), reference, rtol=tolerance, atol=tolerance)
    # and backward: the gradients of the two paths agree as closely
    grads = []
    for sparse in (True, False):
        layer.zero_grad()
        run(layer, kind, sparse, dtype, device).float().square().sum().backward()
        grads.append(torch.cat([p.grad.cpu().double().flatten() for p in layer.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0], grads[1], rtol=5 * tolerance, atol=5 * tolerance * grads[1].abs().max().item())


# --------------------------------------------------------------- second-order gradients


def test_second_order_gradients_through_the_encoder_on_cached_csr_inputs():
    """create_graph=True through a cached CSR adjacency (whose product's backward multiplies by its
    cached transpose) gives the second-order gradients of the edge_index path."""
    results = []
    for sparse in (True, False):
        encoder = make("encoder", cached=True, norm=None)
        x = X.clone().requires_grad_()
        ef, rf = (csr(EF, 5), csr(RF, 9)) if sparse else (EF, RF)
        for _ in range(2):  # the second call reads the cache
            states = encoder(x, REL, ef, rf)
            loss = sum(h.pow(3).sum() + r.square().sum() for h, r in states[1:])
            (grad_x,) = torch.autograd.grad(loss, x, create_graph=True)
            second = torch.autograd.grad(grad_x.square().sum(), [x, *encoder.parameters()])
        results.append([grad_x, *second])
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


def test_two_view_layer_on_csr_inputs_matches_the_dense_equations_in_half_types_too():
    layer = make("two_view", cached=True)
    want_x, want_rel = two_view_layer(layer, X, REL, EF, RF)
    layer.bfloat16()
    got_x, got_rel = layer(
        X.bfloat16(), REL.bfloat16(), csr(EF, 5, dtype=torch.bfloat16), csr(RF, 9, dtype=torch.bfloat16)
    )
    torch.testing.assert_close(got_x.double(), want_x, rtol=4e-2, atol=4e-2)
    torch.testing.assert_close(got_rel.double(), want_rel, rtol=4e-2, atol=4e-2)
