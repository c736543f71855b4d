import pytest
import torch

from torch_wge.utils.quaternion import (
    hamilton_product,
    normalize_quaternion,
    quaternion_conjugate,
    quaternion_inner,
    quaternion_matrix,
    quaternion_norm,
)


def reference_hamilton(q, p):
    """The appendix's Hamilton product written out on scalars, one quaternion at a time."""
    n = q.size(-1) // 4
    out = torch.empty_like(q)
    for m in range(n):
        a1, b1, c1, d1 = (q[..., c * n + m] for c in range(4))
        a2, b2, c2, d2 = (p[..., c * n + m] for c in range(4))
        out[..., 0 * n + m] = a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2
        out[..., 1 * n + m] = a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2
        out[..., 2 * n + m] = a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2
        out[..., 3 * n + m] = a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2
    return out


def test_hamilton_product_matches_reference():
    q, p = torch.randn(2, 7, 12, dtype=torch.float64)
    assert torch.allclose(hamilton_product(q, p), reference_hamilton(q, p), atol=1e-12)


@pytest.mark.parametrize(
    "q_shape, p_shape", [((6, 8), (6, 8)), ((3, 6, 8), (6, 8)), ((6, 8), (1, 8)), ((1, 8), (6, 8))]
)
def test_hamilton_product_gradients_match_reference(q_shape, p_shape):
    torch.manual_seed(0)
    q = torch.randn(q_shape, dtype=torch.float64, requires_grad=True)
    p = torch.randn(p_shape, dtype=torch.float64, requires_grad=True)
    out, expected = hamilton_product(q, p), reference_hamilton(*torch.broadcast_tensors(q, p))
    assert out.shape == expected.shape and torch.allclose(out, expected, atol=1e-12)
    weights = torch.randn(expected.shape, dtype=torch.float64)
    grads = torch.autograd.grad((out * weights).sum(), (q, p))
    expected_grads = torch.autograd.grad((expected * weights).sum(), (q, p))
    for grad, expected_grad in zip(grads, expected_grads):
        assert grad.shape == expected_grad.shape and torch.allclose(grad, expected_grad, atol=1e-12)


def test_hamilton_product_differentiates_twice():
    torch.manual_seed(1)
    q, p = (torch.randn(3, 8, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradgradcheck(hamilton_product, (q, p))


# torch.func's Jacobians import a torch helper that scripts a function (deprecated in torch 2.13)
@pytest.mark.filterwarnings("ignore:`torch.jit.script.*` is deprecated:DeprecationWarning")
def test_hamilton_product_under_torch_func():
    """grad (twice), jvp, vmap (the batch dimension of either operand anywhere, or of one only),
    jacrev and hessian against the scalar reference with plain autograd."""
    generator = torch.Generator().manual_seed(2)
    q, p = torch.randn(2, 3, 8, dtype=torch.float64, generator=generator), torch.randn(3, 8, dtype=torch.float64)
    weights = torch.randn(2, 3, 8, dtype=torch.float64)

    def loss(product):
        return lambda a, b: (product(a, b) * weights).pow(2).sum()

    def reference(a, b):
        return reference_hamilton(*torch.broadcast_tensors(a, b))

    ours = torch.func.grad(loss(hamilton_product), argnums=(0, 1))(q, p)
    expected = torch.func.grad(loss(reference), argnums=(0, 1))(q, p)
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(ours, expected))
    second = torch.func.grad(lambda a, b: torch.func.grad(loss(hamilton_product))(a, b).sum())(q, p)
    expected_second = torch.func.grad(lambda a, b: torch.func.grad(loss(reference))(a, b).sum())(q, p)
    assert torch.allclose(second, expected_second, atol=1e-10)

    tangents = (torch.randn_like(q), torch.randn_like(p))
    out, tangent = torch.func.jvp(hamilton_product, (q, p), tangents)
    expected_out, expected_tangent = torch.func.jvp(reference, (q, p), tangents)
    assert torch.allclose(out, expected_out, atol=1e-12) and torch.allclose(tangent, expected_tangent, atol=1e-12)

    batch_q, batch_p = torch.randn(5, 3, 8, dtype=torch.float64), torch.randn(3, 5, 8, dtype=torch.float64)
    for in_dims, args in [((0, 1), (batch_q, batch_p)), ((0, None), (batch_q, p[0])), ((None, 1), (q[0, :1], batch_p))]:
        batched = torch.func.vmap(hamilton_product, in_dims=in_dims)(*args)
        looped = torch.stack(
            [
                reference(*(arg if dim is None else arg.select(dim, i) for arg, dim in zip(args, in_dims)))
                for i in range(5)
            ]
        )
        assert torch.allclose(batched, looped, atol=1e-12)
    small_q, small_p = q[0, :1], p[:1]
    jacobian = torch.func.jacrev(lambda a: hamilton_product(a, small_p))(small_q)
    expected_jacobian = torch.autograd.functional.jacobian(lambda a: reference(a, small_p), small_q)
    assert torch.allclose(jacobian, expected_jacobian, atol=1e-12)
    hessian = torch.func.hessian(lambda a: hamilton_product(a, small_p).pow(2).sum())(small_q)
    expected_hessian = torch.autograd.functional.hessian(lambda a: reference(a, small_p).pow(2).sum(), small_q)
    assert torch.allclose(hessian, expected_hessian, atol=1e-10)


def test_hamilton_units():
    one, i, j, k = torch.eye(4, dtype=torch.float64)
    assert torch.equal(hamilton_product(i, j), k)
    assert torch.equal(hamilton_product(j, k), i)
    assert torch.equal(hamilton_product(k, i), j)
    assert torch.equal(hamilton_product(j, i), -k)
    for unit in (i, j, k):
        assert torch.equal(hamilton_product(unit, unit), -one)


def test_hamilton_not_commutative_and_norm_multiplicative():
    q, p = torch.randn(2, 50, 8, dtype=torch.float64)
    assert not torch.allclose(hamilton_product(q, p), hamilton_product(p, q))
    assert torch.allclose(quaternion_norm(hamilton_product(q, p)), quaternion_norm(q) * quaternion_norm(p), atol=1e-12)


def test_hamilton_associative_and_broadcasts():
    q, p, s = torch.randn(3, 5, 8, dtype=torch.float64)
    assert torch.allclose(
        hamilton_product(hamilton_product(q, p), s), hamilton_product(q, hamilton_product(p, s)), atol=1e-12
    )
    assert hamilton_product(q, p[:1]).shape == (5, 8)


def test_normalize_and_inner():
    q = torch.randn(6, 16, dtype=torch.float64)
    unit = normalize_quaternion(q)
    assert torch.allclose(quaternion_norm(unit), torch.ones(6, 4, dtype=torch.float64))
    # each quaternion is rescaled on its own: scaling one quaternion leaves the result unchanged
    scale = torch.ones(16, dtype=torch.float64)
    scale[[1, 5, 9, 13]] = 3.7
    assert torch.allclose(normalize_quaternion(q * scale), unit)
    p = torch.randn(6, 16, dtype=torch.float64)
    expected = sum((q[:, c * 4 : (c + 1) * 4] * p[:, c * 4 : (c + 1) * 4]).sum(-1) for c in range(4))
    assert torch.allclose(quaternion_inner(q, p), expected)


def test_quaternion_matrix_is_papers_block_matrix():
    n_in, n_out = 3, 5
    weight = torch.randn(4, n_in, n_out, dtype=torch.float64)
    x = torch.randn(9, 4 * n_in, dtype=torch.float64)
    # The appendix: W (x) p with real blocks W_c of shape [n_out, n_in] acting on column vectors.
    Wr, Wi, Wj, Wk = (w.t() for w in weight)
    paper = torch.cat(
        [
            torch.cat([Wr, -Wi, -Wj, -Wk], 1),
            torch.cat([Wi, Wr, -Wk, Wj], 1),
            torch.cat([Wj, Wk, Wr, -Wi], 1),
            torch.cat([Wk, -Wj, Wi, Wr], 1),
        ],
        0,
    )
    assert torch.allclose(x @ quaternion_matrix(weight), x @ paper.t(), atol=1e-12)


def test_quaternion_matrix_is_hamilton_product_for_diagonal_weights():
    # A weight matrix holding one quaternion per diagonal entry multiplies each quaternion of x.
    n = 4
    w = torch.randn(4, n, dtype=torch.float64)
    weight = torch.stack([torch.diag(w[c]) for c in range(4)])
    x = torch.randn(3, 4 * n, dtype=torch.float64)
    assert torch.allclose(x @ quaternion_matrix(weight), hamilton_product(w.flatten(), x), atol=1e-12)


@pytest.mark.parametrize("fn", [quaternion_norm, normalize_quaternion, lambda q: hamilton_product(q, q)])
def test_size_not_divisible_by_four(fn):
    with pytest.raises(ValueError, match="multiple of 4"):
        fn(torch.randn(2, 6))


def test_quaternion_matrix_rejects_bad_shape():
    with pytest.raises(ValueError, match=r"\[4, n_in, n_out\]"):
        quaternion_matrix(torch.randn(3, 2, 2))


def test_conjugate_moves_the_relation_across_the_inner_product():
    torch.manual_seed(4)
    h, r, t = (torch.randn(5, 12, dtype=torch.float64) for _ in range(3))
    conjugate = quaternion_conjugate(h)
    assert torch.equal(conjugate[:, :3], h[:, :3]) and torch.equal(conjugate[:, 3:], -h[:, 3:])
    # (h ⊗ r) • t = r • (conj(h) ⊗ t)
    left = (hamilton_product(h, r) * t).sum(-1)
    right = (r * hamilton_product(conjugate, t)).sum(-1)
    assert torch.allclose(left, right, atol=1e-12)
