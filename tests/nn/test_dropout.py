import math

import pytest
import torch

from torch_wge.nn.dropout import dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drops_with_probability_p_and_scales_survivors(p):
    torch.manual_seed(0)
    n = 1_000_000
    x = torch.rand(n, dtype=torch.float64) + 0.5  # no zeros of its own
    out = dropout(x, p)
    dropped = out == 0
    # a binomial count: within 5 standard deviations of n p
    assert abs(dropped.sum().item() - n * p) < 5 * math.sqrt(n * p * (1 - p))
    kept = ~dropped
    assert torch.allclose(out[kept], x[kept] / (1 - p), rtol=1e-12, atol=0)


def test_gradient_is_the_mask_scaled():
    torch.manual_seed(1)
    x = (torch.rand(1000, dtype=torch.float64) + 0.5).requires_grad_()
    out = dropout(x, 0.3)
    (grad,) = torch.autograd.grad(out.sum(), x)
    expected = (out != 0).to(torch.float64) / 0.7
    assert torch.allclose(grad, expected, rtol=1e-12, atol=0)


def test_identity_in_eval_mode_and_for_p_zero():
    x = torch.randn(5, 8)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x


def test_same_seed_same_mask():
    x = torch.ones(64, 16)
    torch.manual_seed(3)
    first = dropout(x, 0.5)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.5), first)
    assert not torch.equal(dropout(x, 0.5), first)
