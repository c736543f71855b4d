r"""The package's custom :class:`torch.autograd.Function`\ s, in one place.

Each one defines :meth:`setup_context` (so that :mod:`torch.func` transforms
can run it), has a float64 :func:`~torch.autograd.gradcheck` test, and states
what happens on a second differentiation (``create_graph=True``):

- :class:`FusedOneToNLoss`: a 1-N loss whose gradients are formed with the
  loss in the forward pass. They are first-order only: a backward pass under
  ``create_graph=True`` (or inside a :mod:`torch.func` transform, which
  differentiates that way) raises :class:`RuntimeError` instead of handing on
  gradients that the second differentiation would take for constants.
  :func:`~torch_wge.nn.decoders.loss.one_to_n_loss` with :obj:`fused=False`
  computes the same loss with plain autograd, and it switches to that itself
  inside a :mod:`torch.func` transform.
- :class:`MatmulWithTranspose`: a sparse-dense product whose backward pass
  multiplies by the adjacency's transpose, given beside it (kept by the
  graph convolutions that cache their normalised adjacency). Its backward
  pass is the same product, so it differentiates to any order (a
  :func:`~torch.autograd.gradgradcheck` test); it has a forward-mode rule.

The module holds no state: nothing is cached between calls.
"""

from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import Tensor

__all__ = [
    "FusedOneToNLoss",
    "MatmulWithTranspose",
    "matmul_with_transpose",
]

#: The chunk function of an objective: ``(logits [c, N], rows [P], cols [P], label_smoothing)``
#: gives the chunk's summed loss and overwrites ``logits`` with the loss's gradient in them.
ChunkFunction = Callable[[Tensor, Tensor, Tensor, float], Tensor]


def _matmul_into(out: Tensor, a: Tensor, b: Tensor) -> None:
    """``out = a @ b``, the product formed in the dtype of ``a`` and ``b``."""
    if a.dtype == out.dtype:
        torch.mm(a, b, out=out)
    else:
        out.copy_(a @ b)


def _add_matmul(out: Tensor, a: Tensor, b: Tensor) -> None:
    """``out += a @ b``, the product formed in the dtype of ``a`` and ``b``."""
    if a.dtype == out.dtype:
        out.addmm_(a, b)
    else:
        out.add_(a @ b)


DOUBLE_BACKWARD_REFUSAL = (
    "the fused 1-N loss forms first-order gradients only and cannot be differentiated twice "
    "(create_graph=True); for second-order gradients use OneToNLoss(fused=False) or "
    "one_to_n_loss(..., fused=False), which differentiate with plain autograd"
)


class FusedOneToNLoss(torch.autograd.Function):
    r"""The weighted 1-N loss :math:`\sum_k s_k \sum_{\text{chunks}} \ell(q_k x_k^\top)` of
    ``(queries [L, B, C], entities [L, N, C], rows [P], cols [P], bounds, scale [L], chunk_rows,
    chunk_fn, label_smoothing, matmul_dtype, gradients)``: the logits of :obj:`chunk_rows` queries
    at a time are formed in one reused buffer, the chunk function :obj:`chunk_fn` (a
    :data:`ChunkFunction`) sums their loss and leaves its gradient in the buffer, and, when
    :obj:`gradients`, the gradients of the queries and entities are accumulated from it at once, so
    that backward is two scalings. The positive pairs ``(rows, cols)`` are sorted by row, chunk
    ``i``'s being ``bounds[i]:bounds[i + 1]`` (a list of ints).

    Returns ``(loss, grad_queries, grad_entities)``, the latter two not differentiable (empty
    without :obj:`gradients`). First-order only: a backward pass under ``create_graph=True``
    raises :class:`RuntimeError`."""

    @staticmethod
    def forward(
        queries: Tensor,
        entities: Tensor,
        rows: Tensor,
        cols: Tensor,
        bounds: List[int],
        scale: Tensor,
        chunk_rows: int,
        chunk_fn: ChunkFunction,
        label_smoothing: float,
        matmul_dtype: Optional[torch.dtype],
        gradients: bool,
    ) -> Tuple[Tensor, Tensor, Tensor]:
        num_layers, num_queries, _ = queries.shape
        num_entities = entities.size(1)
        buffer = queries.new_empty(chunk_rows, num_entities)
        grad_queries = torch.empty_like(queries) if gradients else queries.new_empty(0)
        grad_entities = torch.zeros_like(entities) if gradients else entities.new_empty(0)
        loss = queries.new_zeros(())
        # the matmuls' operands, cast once (the loss and the gradients stay in the queries' dtype)
        mm_queries, mm_entities = (
            (queries, entities) if matmul_dtype is None else (queries.to(matmul_dtype), entities.to(matmul_dtype))
        )
        for k in range(num_layers):
            for i, start in enumerate(range(0, num_queries, chunk_rows)):
                stop = min(start + chunk_rows, num_queries)
                q, logits = mm_queries[k, start:stop], buffer[: stop - start]
                _matmul_into(logits, q, mm_entities[k].t())
                lo, hi = bounds[i], bounds[i + 1]
                loss += scale[k] * chunk_fn(logits, rows[lo:hi] - start, cols[lo:hi], label_smoothing)
                if gradients:
                    grad_logits = logits.mul_(scale[k]).to(q.dtype)
                    _matmul_into(grad_queries[k, start:stop], grad_logits, mm_entities[k])
                    _add_matmul(grad_entities[k], grad_logits.t(), q)
        return loss, grad_queries, grad_entities

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor, Tensor]) -> None:
        _, grad_queries, grad_entities = output
        ctx.mark_non_differentiable(grad_queries, grad_entities)
        ctx.save_for_backward(grad_queries, grad_entities)
        ctx.set_materialize_grads(False)  # no zero gradients of the two gradient outputs

    @staticmethod
    def backward(ctx: Any, grad_loss: Optional[Tensor], *_: Any) -> Tuple[Optional[Tensor], ...]:
        if torch.is_grad_enabled():  # create_graph=True: these gradients would be taken for constants
            raise RuntimeError(DOUBLE_BACKWARD_REFUSAL)
        grad_queries, grad_entities = ctx.saved_tensors
        nothing = (None,) * 9
        if grad_loss is None:
            return None, None, *nothing
        return grad_queries * grad_loss, grad_entities * grad_loss, *nothing


class MatmulWithTranspose(torch.autograd.Function):
    r"""The sparse-dense product :math:`\mathbf{A}^{\top} \mathbf{X}` of ``(adj_t, adj, x)``, ``adj``
    (:math:`\mathbf{A}`) being the transpose of ``adj_t`` in the same sparse layout, kept beside it:
    the backward pass multiplies by it, :math:`\partial / \partial \mathbf{X} = \mathbf{A}
    \mathbf{G}`, instead of transposing ``adj_t`` on every call as ``adj_t @ x`` does. The
    adjacency is a constant (no gradient flows to it). The backward pass is this product again, so
    it differentiates to any order (a :func:`~torch.autograd.gradgradcheck` test); the
    forward-mode rule is the product of the tangent."""

    @staticmethod
    def forward(adj_t: Tensor, adj: Tensor, x: Tensor) -> Tensor:
        from torch_wge.utils.sparse import csr_matmul

        return csr_matmul(adj_t, x)

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        adj_t, adj, _ = inputs
        ctx.save_for_backward(adj_t, adj)
        ctx.save_for_forward(adj_t, adj)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[None, None, Tensor]:
        adj_t, adj = ctx.saved_tensors
        return None, None, MatmulWithTranspose.apply(adj, adj_t, grad)

    @staticmethod
    def jvp(ctx: Any, tangent_adj_t: Optional[Tensor], tangent_adj: Optional[Tensor], tangent_x: Tensor) -> Tensor:
        adj_t, adj = ctx.saved_tensors
        return MatmulWithTranspose.apply(adj_t, adj, tangent_x)


def matmul_with_transpose(adj_t: Tensor, adj: Tensor, x: Tensor) -> Tensor:
    r""":math:`\mathbf{A}^{\top} \mathbf{X}` by :class:`MatmulWithTranspose` (``adj``, the transpose of
    ``adj_t``, multiplies the gradients), or ``adj_t @ x`` with plain autograd where the adjacency
    requires a gradient itself.

    Shapes: ``adj_t [M, N]``, ``adj [N, M]``, ``x [N, F]`` give ``[M, F]``.

    Example:
        >>> from torch_wge.utils.sparse import csr_adjacency
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> adj = csr_adjacency(torch.tensor([[1, 2], [0, 0]]), 3)
        >>> x = torch.randn(3, 2, requires_grad=True)
        >>> matmul_with_transpose(adj_t, adj, x).sum().backward()
        >>> x.grad  # node 0 sends to nodes 1 and 2
        tensor([[2., 2.],
                [0., 0.],
                [0., 0.]])
    """
    if adj_t.requires_grad or adj.requires_grad:
        from torch_wge.utils.sparse import sparse_matmul

        return sparse_matmul(adj_t, x)
    return MatmulWithTranspose.apply(adj_t, adj, x)
