"""The custom autograd Functions of torch_wge.utils.autograd against plain float64 autograd on
formulas written out here: gradients, second-order gradients (or their refusal), torch.func."""

import pytest
import torch

from torch_wge.utils.autograd import FusedOneToNLoss


def squared_chunk(logits, rows, cols, label_smoothing):
    """A chunk function for the fused loss: 1/2 sum f^2 - sum of the positives' f; its gradient f - [positive]."""
    loss = 0.5 * logits.pow(2).sum() - logits[rows, cols].sum()
    logits.index_put_((rows, cols), torch.full_like(rows, -1, dtype=logits.dtype), accumulate=True)
    return loss


def reference_squared(queries, entities, rows, cols, scale):
    total = 0.0
    for k in range(queries.size(0)):
        logits = queries[k] @ entities[k].t()
        total = total + scale[k] * (0.5 * logits.pow(2).sum() - logits[rows, cols].sum())
    return total


ROWS, COLS = torch.tensor([0, 0, 2, 3, 3]), torch.tensor([1, 4, 0, 2, 2])  # sorted rows, a repeated pair


def fused(queries, entities, scale, chunk_rows):
    bounds = torch.searchsorted(ROWS, torch.arange(0, queries.size(1) + chunk_rows, chunk_rows)).tolist()
    gradients = torch.is_grad_enabled() and (queries.requires_grad or entities.requires_grad)
    loss, _, _ = FusedOneToNLoss.apply(
        queries, entities, ROWS, COLS, bounds, scale, chunk_rows, squared_chunk, 0.0, None, gradients
    )
    return loss


@pytest.mark.parametrize("chunk_rows", [1, 3, 4])
def test_fused_loss_function_is_the_reference_and_passes_gradcheck(chunk_rows):
    generator = torch.Generator().manual_seed(3)
    queries = torch.randn(2, 4, 8, dtype=torch.float64, generator=generator, requires_grad=True)
    entities = torch.randn(2, 5, 8, dtype=torch.float64, generator=generator, requires_grad=True)
    scale = torch.tensor([0.7, 0.2], dtype=torch.float64)
    loss = fused(queries, entities, scale, chunk_rows)
    expected = reference_squared(queries, entities, ROWS, COLS, scale)
    assert torch.allclose(loss, expected, atol=1e-12)
    grads = torch.autograd.grad(2.5 * loss, (queries, entities))
    expected_grads = torch.autograd.grad(2.5 * expected, (queries, entities))
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grads, expected_grads))
    assert torch.autograd.gradcheck(lambda q, x: fused(q, x, scale, chunk_rows), (queries, entities))


def test_fused_loss_function_refuses_a_double_backward_in_one_line():
    queries = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    entities = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    scale = torch.ones(2, dtype=torch.float64)
    loss = fused(queries, entities, scale, 2)
    with pytest.raises(RuntimeError, match=r"fused=False") as error:
        torch.autograd.grad(loss, (queries, entities), create_graph=True)
    assert "\n" not in str(error.value)
    # torch.func differentiates with create_graph=True: the Function itself refuses there too
    with pytest.raises(RuntimeError, match=r"fused=False"):
        torch.func.grad(lambda q: fused(q, entities.detach(), scale, 2))(queries.detach())
    # the first-order gradient of the same graph is still there
    assert torch.autograd.grad(loss, queries)[0].shape == queries.shape
