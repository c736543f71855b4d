"""torch.jit.script of the decoder, torch.compile of WGE with its default (CSR)
graph inputs: each compared with the eager module (torch.compile of the layers
with fullgraph=True is tested beside each layer)."""

import copy

import pytest
import torch
import torch_geometric.transforms as T

from torch_wge.nn import WGE, OneToNLoss, QuatEDecoder
from torch_wge.testing import random_kg
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform
from torch_wge.utils.quaternion import hamilton_product

# torch 2.13 marks torch.jit.script deprecated; the decoder still supports it
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script.*` is deprecated:DeprecationWarning")


def test_script_quate_decoder_matches_eager():
    torch.manual_seed(0)
    decoder = QuatEDecoder(8).double().eval()
    decoder.batch_norm.running_mean.uniform_(-1, 1)  # a non-trivial batch norm
    scripted = torch.jit.script(decoder)
    h, r, t, x = (torch.randn(n, 8, dtype=torch.float64) for n in (3, 3, 3, 6))
    assert torch.allclose(scripted(h, r), decoder(h, r), atol=1e-12)
    assert torch.allclose(scripted.score(h, r, t), decoder.score(h, r, t), atol=1e-12)
    assert torch.allclose(scripted.score_all(h, r, x), decoder.score_all(h, r, x), atol=1e-12)


def test_scripted_hamilton_product_matches_eager():
    # TorchScript calls no autograd function: its branch forms the sixteen signed terms at once
    scripted = torch.jit.script(hamilton_product)
    q, p = torch.randn(2, 3, 5, 12, dtype=torch.float64)
    assert torch.allclose(scripted(q, p), hamilton_product(q, p), atol=1e-12)
    assert torch.allclose(scripted(q, p[:1, :1]), hamilton_product(q, p[:1, :1]), atol=1e-12)


@pytest.fixture(scope="module")
def data():
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(random_kg(30, 3, 120, seed=1))


def test_compile_wge_inference_and_training_match_eager(data):
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = WGE(30, 3, hidden_channels=2, num_layers=2, dropout=0.0).double()
    model = copy.deepcopy(eager)  # fresh caches: the graph is normalised inside the compiled region
    inputs = model.graph_inputs(data)  # the default: torch.sparse_csr adjacencies
    assert all(adj.layout == torch.sparse_csr for adj in inputs.values())
    heads, relations = torch.tensor([0, 1, 2, 7]), torch.tensor([0, 1, 4, 5])
    positives = torch.tensor([[0, 1, 2, 3, 3], [3, 4, 5, 0, 9]])

    loss_fn = OneToNLoss()

    def step(m):
        return loss_fn(m, m.encode(**inputs), heads, relations, positives)

    compiled_step = torch.compile(step, backend="aot_eager")
    loss = compiled_step(model.train())
    loss.backward()
    reference = step(eager.train())
    reference.backward()
    assert torch.allclose(loss, reference, atol=1e-12)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-10), name

    compiled = torch.compile(model.eval(), backend="aot_eager")
    with torch.no_grad():
        assert torch.allclose(
            compiled(heads, relations, **inputs), eager.eval()(heads, relations, **inputs), atol=1e-12
        )
