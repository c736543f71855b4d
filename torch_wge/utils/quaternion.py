r"""Quaternion algebra on real tensors (the appendix of the WGE paper).

A vector of :math:`n` quaternions :math:`\mathbf{q} \in \mathbb{H}^n` is stored
as a real tensor whose last dimension has size :math:`4n`, laid out as four
contiguous blocks ``[r | i | j | k]`` of width :math:`n` each:

.. code-block:: text

    q = [q_r(0) .. q_r(n-1) | q_i(0) .. q_i(n-1) | q_j(0) ..  | q_k(0) .. ]

Every function here works on the last dimension and broadcasts over the
leading ones. A last dimension not divisible by 4 raises :class:`ValueError`.
"""

from typing import Dict, List, Tuple

import torch
from torch import Tensor

__all__ = [
    "check_quaternion_size",
    "quaternion_components",
    "hamilton_product",
    "quaternion_norm",
    "normalize_quaternion",
    "quaternion_inner",
    "quaternion_matrix",
]


_signed_blocks_index: Dict[torch.device, Tensor] = {}  # _new_signed_blocks_index on each device, made once


def _new_signed_blocks_index(device: torch.device) -> Tensor:
    r"""``[16]``: component ``d`` of :math:`\mathbf{q} \otimes \mathbf{p}` is
    :math:`\sum_b s_{bd}\, q_{b \oplus d}\, p_b` (:math:`\oplus` the exclusive or of the component
    numbers 0-3 of r, i, j, k), and entry ``4 b + d`` is the block of :math:`[q; -q]` (eight blocks) that
    holds :math:`s_{bd}\, q_{b \oplus d}`: the minus signs are those of the four rows ``b`` of the block
    matrix of :func:`quaternion_matrix`, ``+ + + +``, ``- + + -``, ``- - + +`` and ``- + - +``."""
    return torch.tensor([0, 1, 2, 3, 5, 0, 3, 6, 6, 7, 0, 1, 7, 2, 5, 0], device=device)


def _signed_components(q: Tensor, dim: int) -> Tensor:
    r"""The 16 signed components :math:`s_{bd}\, q_{b \oplus d}` of the Hamilton product, ``(b, d)``
    row-major along ``dim`` (of size 4 in ``q``, 16 in the result): one ``index_select`` from
    :math:`[q; -q]`, so that a product costs a handful of kernels, forward and backward alike."""
    if not torch.jit.is_scripting():
        index = _signed_blocks_index.get(q.device)
        if index is None:
            index = _signed_blocks_index[q.device] = _new_signed_blocks_index(q.device)
    else:  # TorchScript keeps no global state
        index = _new_signed_blocks_index(q.device)
    return torch.cat([q, -q], dim=dim).index_select(dim, index)


def check_quaternion_size(size: int, name: str = "size") -> int:
    r"""Returns the number of quaternions :math:`n = \text{size} / 4`.

    Raises:
        ValueError: if ``size`` is not a positive multiple of 4.
    """
    if size <= 0 or size % 4 != 0:
        raise ValueError(
            f"{name} must be a positive multiple of 4 (quaternion vectors are "
            f"stored as four [r | i | j | k] blocks), got {size}"
        )
    return size // 4


def quaternion_components(q: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Splits ``q`` of shape ``[..., 4n]`` into its four ``[..., n]`` blocks
    :math:`(q_r, q_i, q_j, q_k)` (views, no copy)."""
    check_quaternion_size(q.size(-1), "last dimension")
    q_r, q_i, q_j, q_k = q.chunk(4, dim=-1)
    return q_r, q_i, q_j, q_k


# Component d of q ⊗ p is sum(sign * q_a * p_b) over the (a, b, sign) of HAMILTON_TERMS[d]
# (components 0, 1, 2, 3 = r, i, j, k), as in hamilton_product's formula.
HAMILTON_TERMS = (
    ((0, 0, 1), (1, 1, -1), (2, 2, -1), (3, 3, -1)),
    ((1, 0, 1), (0, 1, 1), (3, 2, -1), (2, 3, 1)),
    ((2, 0, 1), (3, 1, 1), (0, 2, 1), (1, 3, -1)),
    ((3, 0, 1), (2, 1, -1), (1, 2, 1), (0, 3, 1)),
)


def _signed_terms(d: int, conj_q: bool, conj_p: bool) -> List[Tuple[int, int, int]]:
    """The terms of component ``d`` with the signs of conjugated operands, positive ones first."""
    terms = [
        (a, b, sign * (-1 if conj_q and a else 1) * (-1 if conj_p and b else 1)) for a, b, sign in HAMILTON_TERMS[d]
    ]
    return sorted(terms, key=lambda term: -term[2])


def hamilton_product_into(out: Tensor, q: Tensor, p: Tensor, conj_q: bool = False, conj_p: bool = False) -> Tensor:
    r"""Writes :math:`\tilde{\mathbf{q}} \otimes \tilde{\mathbf{p}}` into
    ``out`` and returns it, with :math:`\tilde{\mathbf{q}}` the conjugate of
    ``q`` if :obj:`conj_q` (likewise ``p``): a product and three fused
    multiply-adds per component, no temporaries. Not differentiable
    (:func:`hamilton_product` is).

    Shapes: ``q`` and ``p`` ``[..., 4n]``, broadcastable to ``out``'s shape.
    """
    q_parts, p_parts, out_parts = q.chunk(4, dim=-1), p.chunk(4, dim=-1), out.chunk(4, dim=-1)
    for d, part in enumerate(out_parts):
        (a, b, sign), *rest = _signed_terms(d, conj_q, conj_p)
        torch.mul(q_parts[a], p_parts[b], out=part)
        if sign < 0:
            part.neg_()
        for a, b, sign in rest:
            part.addcmul_(q_parts[a], p_parts[b], value=sign)
    return out


class _HamiltonProduct(torch.autograd.Function):
    r""":math:`\tilde{\mathbf{q}} \otimes \tilde{\mathbf{p}}` (conjugated as :obj:`conj_q` and
    :obj:`conj_p` say), its gradients products of the same kind: with :math:`\mathbf{g}` the output's
    gradient, :math:`\partial / \partial \tilde{\mathbf{q}} = \mathbf{g} \otimes \bar{\tilde{\mathbf{p}}}`
    and :math:`\partial / \partial \tilde{\mathbf{p}} = \bar{\tilde{\mathbf{q}}} \otimes \mathbf{g}`, conjugated
    back through :math:`\overline{\mathbf{a} \otimes \mathbf{b}} = \bar{\mathbf{b}} \otimes \bar{\mathbf{a}}`
    where the operand was. So the backward pass differentiates again."""

    @staticmethod
    def forward(ctx, q: Tensor, p: Tensor, conj_q: bool, conj_p: bool) -> Tensor:
        ctx.save_for_backward(q, p)
        ctx.conj = (conj_q, conj_p)
        out = torch.empty(torch.broadcast_shapes(q.shape, p.shape), dtype=torch.result_type(q, p), device=q.device)
        return hamilton_product_into(out, q, p, conj_q, conj_p)

    @staticmethod
    def backward(ctx, grad: Tensor):
        q, p = ctx.saved_tensors
        conj_q, conj_p = ctx.conj
        grad_q = grad_p = None
        if ctx.needs_input_grad[0]:
            if conj_q:
                grad_q = _HamiltonProduct.apply(p, grad, conj_p, True)
            else:
                grad_q = _HamiltonProduct.apply(grad, p, False, not conj_p)
            grad_q = grad_q.sum_to_size(q.shape)
        if ctx.needs_input_grad[1]:
            if conj_p:
                grad_p = _HamiltonProduct.apply(grad, q, True, conj_q)
            else:
                grad_p = _HamiltonProduct.apply(q, grad, not conj_q, False)
            grad_p = grad_p.sum_to_size(p.shape)
        return grad_q, grad_p, None, None


def hamilton_product(q: Tensor, p: Tensor) -> Tensor:
    r"""Element-wise Hamilton product :math:`\mathbf{q} \otimes \mathbf{p}` of
    two quaternion vectors:

    .. math::
        \mathbf{q} \otimes \mathbf{p} =
        (q_r p_r - q_i p_i - q_j p_j - q_k p_k)
        + (q_i p_r + q_r p_i - q_k p_j + q_j p_k)\,\mathsf{i}
        + (q_j p_r + q_k p_i + q_r p_j - q_i p_k)\,\mathsf{j}
        + (q_k p_r - q_j p_i + q_i p_j + q_r p_k)\,\mathsf{k}

    It is not commutative. Each component is written in place (a product and
    three fused multiply-adds), forward and backward, which takes a third of
    the kernels and two thirds of the time of the sixteen products and twelve
    sums as separate operations; it differentiates twice.

    Shapes: ``q [..., 4n]`` and ``p [..., 4n]`` (broadcastable) give ``[..., 4n]``.

    Example:
        >>> i = torch.tensor([0., 1., 0., 0.]); j = torch.tensor([0., 0., 1., 0.])
        >>> hamilton_product(i, j)  # i j = k
        tensor([0., 0., 0., 1.])
    """
    check_quaternion_size(q.size(-1), "last dimension")
    check_quaternion_size(p.size(-1), "last dimension")
    if torch.jit.is_scripting():  # TorchScript calls no autograd Function: the 16 signed terms at once
        n = q.size(-1) // 4
        terms = _signed_components(q.unflatten(-1, (4, n)), dim=-2).unflatten(-2, (4, 4))  # [..., b, d, n]
        return (terms * p.unflatten(-1, (4, n)).unsqueeze(-2)).sum(dim=-3).flatten(-2)
    else:
        return _HamiltonProduct.apply(q, p, False, False)


def quaternion_conjugate(q: Tensor) -> Tensor:
    r"""Conjugate :math:`\bar{q} = q_r - q_i \mathsf{i} - q_j \mathsf{j} - q_k \mathsf{k}`
    of each quaternion. With it the score of a relation moves to one side of
    the inner product: :math:`(\mathbf{h} \otimes \mathbf{r}) \bullet \mathbf{t}
    = \mathbf{r} \bullet (\bar{\mathbf{h}} \otimes \mathbf{t})`.

    Shapes: ``q [..., 4n]`` gives ``[..., 4n]``.
    """
    n = check_quaternion_size(q.size(-1), "last dimension")
    return torch.cat([q[..., :n], -q[..., n:]], dim=-1)


def quaternion_norm(q: Tensor) -> Tensor:
    r"""Norm of each quaternion, :math:`\|q\| = \sqrt{q_r^2+q_i^2+q_j^2+q_k^2}`.

    Shapes: ``q [..., 4n]`` gives ``[..., n]``.
    """
    n = check_quaternion_size(q.size(-1), "last dimension")
    return q.unflatten(-1, (4, n)).pow(2).sum(dim=-2).sqrt()


def normalize_quaternion(q: Tensor, eps: float = 1e-12) -> Tensor:
    r"""Unit quaternions :math:`q^\triangleleft = q / \max(\|q\|, \epsilon)`,
    each of the :math:`n` quaternions normalised on its own.

    Shapes: ``q [..., 4n]`` gives ``[..., 4n]``.
    """
    n = check_quaternion_size(q.size(-1), "last dimension")
    blocks = q.unflatten(-1, (4, n))
    norm = blocks.pow(2).sum(dim=-2, keepdim=True).sqrt().clamp_min(eps)
    return (blocks / norm).flatten(-2)


def quaternion_inner(q: Tensor, p: Tensor) -> Tensor:
    r"""Quaternion inner product
    :math:`\mathbf{q} \bullet \mathbf{p} = q_r^\top p_r + q_i^\top p_i
    + q_j^\top p_j + q_k^\top p_k`, which in the block layout is the ordinary
    dot product of the real vectors.

    Shapes: ``q [..., 4n]`` and ``p [..., 4n]`` give ``[...]``.
    """
    check_quaternion_size(q.size(-1), "last dimension")
    return (q * p).sum(dim=-1)


def quaternion_matrix(weight: Tensor) -> Tensor:
    r"""The real matrix :math:`M` of a quaternion weight matrix
    :math:`\mathbf{W} = W_r + W_i\mathsf{i} + W_j\mathsf{j} + W_k\mathsf{k}`,
    so that for row vectors ``x @ M`` equals :math:`\mathbf{W} \otimes \mathbf{x}`:

    .. math::
        M = \begin{bmatrix}
        W_r & W_i & W_j & W_k \\
        -W_i & W_r & W_k & -W_j \\
        -W_j & -W_k & W_r & W_i \\
        -W_k & W_j & -W_i & W_r
        \end{bmatrix}

    which is the transpose of the paper's block matrix (its rows act on column
    vectors). The product with node features is then a single matmul.

    Shapes: ``weight [4, n_in, n_out]`` (the blocks :math:`W_r, W_i, W_j, W_k`)
    gives ``[4 n_in, 4 n_out]``.
    """
    if weight.dim() != 3 or weight.size(0) != 4:
        raise ValueError(f"expected a quaternion weight of shape [4, n_in, n_out], got {list(weight.shape)}")
    n_in, n_out = weight.shape[1:]
    # blocks [4 (b), 4 (d), n_in, n_out]: block (b, d) of M is the signed W_{b xor d}
    blocks = _signed_components(weight, dim=0).unflatten(0, (4, 4))
    return blocks.permute(0, 2, 1, 3).reshape(4 * n_in, 4 * n_out)
