"""matmul_dtype: the encoder's quaternion matmuls in bfloat16 for float32 inputs, against the float64
reference; parameters, outputs and float64 inputs keep their dtype."""

import pytest
import torch
from dense_two_view import tiny_kg_views

from torch_wge.nn import WGE, QuaternionLinear, TwoViewConv
from torch_wge.testing import random_kg
from torch_wge.training import TrainConfig, build_model
from torch_wge.training.precision import PRECISIONS

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script.*` is deprecated:DeprecationWarning")

CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


def relative_error(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("bias", [True, False])
def test_quaternion_linear_in_bfloat16_follows_the_float64_product(bias, device):
    torch.manual_seed(0)
    lin = QuaternionLinear(64, 32, bias=bias, matmul_dtype=torch.bfloat16).to(device)
    if bias:
        torch.nn.init.normal_(lin.bias)
    x = torch.randn(50, 64, device=device, requires_grad=True)
    out = lin(x)
    assert out.dtype == torch.float32 and all(p.dtype == torch.float32 for p in lin.parameters())
    # the reference: the same parameters, in float64, no cast
    x64 = x.detach().double().requires_grad_()
    matrix = lin.matrix().detach().double().requires_grad_()
    want = x64 @ matrix + (lin.bias.detach().double() if bias else 0)
    error = relative_error(out, want)
    exact = relative_error(torch.nn.functional.linear(x, lin.matrix().t(), lin.bias), want)
    assert exact < 1e-6 < error < 1e-2  # bfloat16 operands (8 significant bits), float32 accumulation
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    (want * weights.double()).sum().backward()
    assert relative_error(x.grad, x64.grad) < 2e-2
    # the weight's gradient reaches the float32 quaternion blocks through the bfloat16 cast
    assert lin.weight.grad.dtype == torch.float32 and lin.weight.grad.abs().sum() > 0


def test_float64_inputs_and_no_matmul_dtype_multiply_in_their_own_dtype():
    torch.manual_seed(1)
    plain, cast = QuaternionLinear(16, 16), QuaternionLinear(16, 16, matmul_dtype=torch.bfloat16)
    cast.load_state_dict(plain.state_dict())
    x = torch.randn(7, 16)
    assert not torch.equal(cast(x), plain(x))  # float32 inputs: the bfloat16 product
    plain, cast = plain.double(), cast.double()
    assert torch.equal(cast(x.double()), plain(x.double()))  # a float64 model keeps its precision
    assert "matmul_dtype=torch.bfloat16" in repr(cast) and "matmul_dtype" not in repr(plain)


def test_scripted_quaternion_linear_with_matmul_dtype_equals_eager():
    lin = QuaternionLinear(16, 8, matmul_dtype=torch.bfloat16)
    x = torch.randn(5, 16)
    assert torch.equal(torch.jit.script(lin)(x), lin(x))


def test_two_view_conv_and_wge_hand_matmul_dtype_to_their_quaternion_weights():
    ef, rf = tiny_kg_views()
    two_view = TwoViewConv(8, 8, matmul_dtype=torch.bfloat16)
    assert two_view.entity_lin.matmul_dtype == two_view.relation_lin.matmul_dtype == torch.bfloat16
    with pytest.raises(ValueError, match="matmul_dtype applies to quaternion weights only"):
        TwoViewConv(8, 8, quaternion=False, matmul_dtype=torch.bfloat16)
    torch.manual_seed(2)
    model = WGE(5, 2, hidden_channels=8, num_layers=2, matmul_dtype=torch.bfloat16).eval()
    reference = WGE(5, 2, hidden_channels=8, num_layers=2).double().eval()
    reference.load_state_dict(model.state_dict())
    lins = [m for m in model.modules() if isinstance(m, QuaternionLinear)]
    assert len(lins) == 4 and all(lin.matmul_dtype == torch.bfloat16 for lin in lins)
    got, want = model.encode(ef, rf), reference.encode(ef, rf)
    for got_x, want_x in zip(got.entities, want.entities):
        assert got_x.dtype == torch.float32 and relative_error(got_x, want_x) < 2e-2
    gcn = WGE(5, 2, hidden_channels=8, conv="gcn", matmul_dtype=torch.bfloat16)  # real weights: not cast
    assert not any(isinstance(m, QuaternionLinear) for m in gcn.modules())


@pytest.mark.parametrize("precision, expected", [("float32", None), ("tf32", None), ("bf16", torch.bfloat16)])
def test_build_model_takes_the_encoder_matmul_dtype_of_the_precision(precision, expected):
    model = build_model(TrainConfig(hidden_channels=4, num_layers=1, precision=precision), random_kg(10, 2, 30, seed=0))
    lins = [m for m in model.modules() if isinstance(m, QuaternionLinear)]
    assert lins and all(lin.matmul_dtype == expected for lin in lins)
    assert PRECISIONS[precision].encoder_matmul_dtype == expected
