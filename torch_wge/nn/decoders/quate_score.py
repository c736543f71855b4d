r"""The QuatE score of a batch of triples as one autograd function.

:func:`quate_score` gives the same numbers and gradients as
``(hamilton_product(h, r) * t).sum(-1)`` with one function for the product and
the inner product: backward writes the heads' and tails' gradients into one
tensor (the gradient of the one lookup that gathered them) and keeps nothing
but the operands and the query :math:`\mathbf{h} \otimes \mathbf{r}`.
"""

from typing import Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from torch_wge.utils.quaternion import check_quaternion_size, hamilton_product_into

__all__ = ["quate_score"]


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
