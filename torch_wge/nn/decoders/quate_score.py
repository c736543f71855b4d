r"""The QuatE score of a batch of triples as one autograd function.

:func:`quate_score` gives the same numbers and gradients as
``(hamilton_product(h, r) * t).sum(-1)`` but writes every component of each
Hamilton product straight into its block of one output (a product and three
fused multiply-adds per component), so that neither the forward nor the
backward pass builds the concatenations and the separate products, sums and
negations that autograd would keep for the sixteen terms.
"""

from typing import List, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from torch_wge.utils.quaternion import check_quaternion_size

__all__ = ["quate_score"]

# Component d of q ⊗ p is sum(sign * q_a * p_b) over the (a, b, sign) of
# HAMILTON_TERMS[d] (components 0, 1, 2, 3 = r, i, j, k), as in hamilton_product.
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
    ``q`` if :obj:`conj_q` (likewise ``p``): four operations per component,
    no temporaries. Not differentiable (:func:`quate_score` uses it inside
    its own backward).

    Shapes: ``q``, ``p`` and ``out`` ``[..., 4n]``, of one shape.
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


class _QuatEScore(torch.autograd.Function):
    @staticmethod
    def forward(ctx, nodes: Tensor, r: Tensor) -> Tensor:
        h, t = nodes.split(r.size(0))
        query = hamilton_product_into(torch.empty_like(r), h, r)
        ctx.save_for_backward(nodes, r, query)
        return torch.linalg.vecdot(query, t)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tuple[Tensor, Tensor]:
        # d = (h ⊗ r) • t = h • (t ⊗ conj(r)) = r • (conj(h) ⊗ t)
        nodes, r, query = ctx.saved_tensors
        h, t = nodes.split(r.size(0))
        grad = grad.unsqueeze(-1)
        t_grad = t * grad
        grad_nodes = torch.empty_like(nodes)
        grad_h, grad_t = grad_nodes.split(r.size(0))
        hamilton_product_into(grad_h, t_grad, r, conj_p=True)
        torch.mul(query, grad, out=grad_t)
        return grad_nodes, hamilton_product_into(torch.empty_like(r), h, t_grad, conj_q=True)


def quate_score(nodes: Tensor, r: Tensor) -> Tensor:
    r"""QuatE scores :math:`(\mathbf{h}_b \otimes \mathbf{r}_b) \bullet
    \mathbf{t}_b` of :math:`B` triples, given the heads and the tails stacked
    as ``nodes = [h; t]`` (one tensor, so that one embedding lookup gathers
    both and its backward gets one gradient). ``r`` is used as given: for
    QuatE, pass unit quaternions. Twice differentiable it is not (a second
    backward raises an error).

    Shapes: ``nodes [2B, 4n]`` and ``r [B, 4n]`` give ``[B]``.

    Example:
        >>> from torch_wge.utils.quaternion import hamilton_product
        >>> h, r, t = torch.randn(3, 8), torch.randn(3, 8), torch.randn(3, 8)
        >>> torch.allclose(quate_score(torch.cat([h, t]), r), (hamilton_product(h, r) * t).sum(-1), atol=1e-6)
        True
    """
    check_quaternion_size(r.size(-1), "last dimension")
    if nodes.dim() != 2 or r.dim() != 2 or nodes.shape != (2 * r.size(0), r.size(1)):
        raise ValueError(
            f"expected nodes of shape [2B, C] and r of shape [B, C], got {list(nodes.shape)} and {list(r.shape)}"
        )
    return _QuatEScore.apply(nodes, r)
