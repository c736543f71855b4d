r"""Quaternion algebra on real tensors (the appendix of the WGE paper).

A vector of :math:`n` quaternions :math:`\mathbf{q} \in \mathbb{H}^n` is stored
as a real tensor whose last dimension has size :math:`4n`, laid out as four
contiguous blocks ``[r | i | j | k]`` of width :math:`n` each:

.. code-block:: text

    q = [q_r(0) .. q_r(n-1) | q_i(0) .. q_i(n-1) | q_j(0) ..  | q_k(0) .. ]

Every function here works on the last dimension and broadcasts over the
leading ones. A last dimension not divisible by 4 raises :class:`ValueError`.
"""

from typing import Tuple

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


def _signed_components(q: Tensor, dim: int) -> Tensor:
    r"""The 16 signed components :math:`s_{bd}\, q_{b \oplus d}` of the Hamilton product, ``(b, d)``
    row-major along ``dim`` (of size 4 in ``q``, 16 in the result): component ``d`` of
    :math:`\mathbf{q} \otimes \mathbf{p}` is :math:`\sum_b s_{bd}\, q_{b \oplus d}\, p_b`
    (:math:`\oplus` the exclusive or of the component numbers 0-3 of r, i, j, k), and the minus
    signs are those of the four rows ``b`` of the block matrix of :func:`quaternion_matrix`,
    ``+ + + +``, ``- + + -``, ``- - + +`` and ``- + - +``. One ``stack`` of the components and
    three negated ones: no index tensor, so nothing is kept between calls or moved to a device."""
    r, i, j, k = q.unbind(dim)
    minus_i, minus_j, minus_k = -i, -j, -k
    return torch.stack([r, i, j, k, minus_i, r, k, minus_j, minus_j, minus_k, r, i, minus_k, j, minus_i, r], dim)


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


def hamilton_product(q: Tensor, p: Tensor) -> Tensor:
    r"""Element-wise Hamilton product :math:`\mathbf{q} \otimes \mathbf{p}` of
    two quaternion vectors:

    .. math::
        \mathbf{q} \otimes \mathbf{p} =
        (q_r p_r - q_i p_i - q_j p_j - q_k p_k)
        + (q_i p_r + q_r p_i - q_k p_j + q_j p_k)\,\mathsf{i}
        + (q_j p_r + q_k p_i + q_r p_j - q_i p_k)\,\mathsf{j}
        + (q_k p_r - q_j p_i + q_i p_j + q_r p_k)\,\mathsf{k}

    It is not commutative. It is one product of the sixteen signed terms and one
    sum, in plain operations: it differentiates to any order and runs under
    :mod:`torch.func` transforms, :func:`torch.compile` and TorchScript.

    Shapes: ``q [..., 4n]`` and ``p [..., 4n]`` (broadcastable) give ``[..., 4n]``.

    Example:
        >>> i = torch.tensor([0., 1., 0., 0.]); j = torch.tensor([0., 0., 1., 0.])
        >>> hamilton_product(i, j)  # i j = k
        tensor([0., 0., 0., 1.])
    """
    n = check_quaternion_size(q.size(-1), "last dimension")
    check_quaternion_size(p.size(-1), "last dimension")
    terms = _signed_components(q.unflatten(-1, (4, n)), dim=-2).unflatten(-2, (4, 4))  # [..., b, d, n]
    return (terms * p.unflatten(-1, (4, n)).unsqueeze(-2)).sum(dim=-3).flatten(-2)


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
