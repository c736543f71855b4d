"""The custom autograd Functions of torch_wge.utils.autograd against plain float64 autograd on
formulas written out here: gradients, second-order gradients (or their refusal), torch.func."""

import pytest
import torch

from torch_wge.utils.autograd import FusedOneToNLoss, HamiltonProduct


def conjugate(q):
    n = q.size(-1) // 4
    return torch.cat([q[..., :n], -q[..., n:]], dim=-1)


def reference_product(q, p, conj_q=False, conj_p=False):
    """The Hamilton product of the appendix, one component of each operand at a time (plain autograd)."""
    q, p = conjugate(q) if conj_q else q, conjugate(p) if conj_p else p
    a1, b1, c1, d1 = q.chunk(4, dim=-1)
    a2, b2, c2, d2 = p.chunk(4, dim=-1)
    return torch.cat(
        [
            a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2,
            a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2,
            a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2,
            a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2,
        ],
        dim=-1,
    )


CONJUGATIONS = [(False, False), (True, False), (False, True), (True, True)]
SHAPES = [((3, 8), (3, 8)), ((2, 3, 8), (3, 8)), ((3, 8), (1, 8)), ((1, 8), (2, 3, 8))]


def operands(q_shape, p_shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True) for shape in (q_shape, p_shape)
    )


@pytest.mark.parametrize("conj_q, conj_p", CONJUGATIONS)
@pytest.mark.parametrize("q_shape, p_shape", SHAPES)
def test_hamilton_product_function_is_the_reference_and_passes_gradcheck(conj_q, conj_p, q_shape, p_shape):
    q, p = operands(q_shape, p_shape)
    out = HamiltonProduct.apply(q, p, conj_q, conj_p)
    expected = reference_product(q, p, conj_q, conj_p)
    assert out.shape == expected.shape and torch.allclose(out, expected, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: HamiltonProduct.apply(a, b, conj_q, conj_p), (q, p))


@pytest.mark.parametrize("conj_q, conj_p", CONJUGATIONS)
@pytest.mark.parametrize("q_shape, p_shape", SHAPES[:2])
def test_hamilton_product_differentiates_twice(conj_q, conj_p, q_shape, p_shape):
    """Double backward is supported: gradgradcheck, and Hessian-vector products equal the reference's."""
    q, p = operands(q_shape, p_shape, seed=1)
    assert torch.autograd.gradgradcheck(lambda a, b: HamiltonProduct.apply(a, b, conj_q, conj_p), (q, p))
    weights = torch.randn(torch.broadcast_shapes(q_shape, p_shape), dtype=torch.float64)
    vectors = [torch.randn_like(q), torch.randn_like(p)]

    def hessian_vector(product):
        # a loss that is not bilinear in (q, p), so that the Hessian has more than the cross terms
        loss = (product(q, p) * weights).pow(2).sum()
        grads = torch.autograd.grad(loss, (q, p), create_graph=True)
        return torch.autograd.grad(sum((g * v).sum() for g, v in zip(grads, vectors)), (q, p))

    ours = hessian_vector(lambda a, b: HamiltonProduct.apply(a, b, conj_q, conj_p))
    expected = hessian_vector(lambda a, b: reference_product(a, b, conj_q, conj_p))
    for got, want in zip(ours, expected):
        assert torch.allclose(got, want, atol=1e-10)


# torch.func's Jacobians import a torch helper that scripts a function (deprecated in torch 2.13)
@pytest.mark.filterwarnings("ignore:`torch.jit.script.*` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("conj_q, conj_p", CONJUGATIONS)
def test_hamilton_product_under_torch_func(conj_q, conj_p):
    """grad, jvp and vmap (with the batch dimension of either operand anywhere, or of one only)."""
    q, p = (t.detach() for t in operands((2, 3, 8), (3, 8), seed=2))
    weights = torch.randn(2, 3, 8, dtype=torch.float64)

    def loss(product):
        return lambda a, b: (product(a, b, conj_q, conj_p) * weights).pow(2).sum()

    ours = torch.func.grad(loss(HamiltonProduct.apply), argnums=(0, 1))(q, p)
    expected = torch.func.grad(loss(reference_product), argnums=(0, 1))(q, p)
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(ours, expected))
    # second order through torch.func: grad of grad
    hessian_row = torch.func.grad(lambda a, b: torch.func.grad(loss(HamiltonProduct.apply))(a, b).sum())(q, p)
    expected_row = torch.func.grad(lambda a, b: torch.func.grad(loss(reference_product))(a, b).sum())(q, p)
    assert torch.allclose(hessian_row, expected_row, atol=1e-10)

    tangents = (torch.randn_like(q), torch.randn_like(p))
    out, tangent = torch.func.jvp(lambda a, b: HamiltonProduct.apply(a, b, conj_q, conj_p), (q, p), tangents)
    expected_out, expected_tangent = torch.func.jvp(
        lambda a, b: reference_product(a, b, conj_q, conj_p), (q, p), tangents
    )
    assert torch.allclose(out, expected_out, atol=1e-12) and torch.allclose(tangent, expected_tangent, atol=1e-12)

    batch_q, batch_p = torch.randn(5, 3, 8, dtype=torch.float64), torch.randn(3, 5, 8, dtype=torch.float64)
    for in_dims, args in [((0, 1), (batch_q, batch_p)), ((0, None), (batch_q, p[0])), ((None, 1), (q[0, :1], batch_p))]:
        batched = torch.func.vmap(lambda a, b: HamiltonProduct.apply(a, b, conj_q, conj_p), in_dims=in_dims)(*args)
        looped = torch.stack(
            [
                reference_product(
                    *(arg if dim is None else arg.select(dim, i) for arg, dim in zip(args, in_dims)), conj_q, conj_p
                )
                for i in range(5)
            ]
        )
        assert torch.allclose(batched, looped, atol=1e-12)
    # the Jacobian (reverse mode over vmap) and the Hessian (forward over reverse) of a small product
    small_q, small_p = q[0, :1], p[:1]
    jacobian = torch.func.jacrev(lambda a: HamiltonProduct.apply(a, small_p, conj_q, conj_p))(small_q)
    expected_jacobian = torch.autograd.functional.jacobian(
        lambda a: reference_product(a, small_p, conj_q, conj_p), small_q
    )
    assert torch.allclose(jacobian, expected_jacobian, atol=1e-12)
    hessian = torch.func.hessian(lambda a: HamiltonProduct.apply(a, small_p, conj_q, conj_p).pow(2).sum())(small_q)
    expected_hessian = torch.autograd.functional.hessian(
        lambda a: reference_product(a, small_p, conj_q, conj_p).pow(2).sum(), small_q
    )
    assert torch.allclose(hessian, expected_hessian, atol=1e-10)


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
