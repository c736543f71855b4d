import contextlib
import warnings
from typing import Iterator, Sequence, Tuple

import torch
from torch import Tensor
from torch_geometric.utils import to_torch_csr_tensor

#: torch's one-time notices on creating a sparse CSR tensor; they say nothing about the tensor at hand.
CSR_NOTICES = ("Sparse CSR tensor support is in beta", "Sparse invariant checks are implicitly disabled")


@contextlib.contextmanager
def _without_csr_notices() -> Iterator[None]:
    with warnings.catch_warnings():
        for notice in CSR_NOTICES:
            warnings.filterwarnings("ignore", message=notice, category=UserWarning)
        yield


def csr_adjacency(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float) -> Tensor:
    r"""The transposed adjacency :math:`\mathbf{A}^{\top}` (row: target,
    column: source) of :obj:`edge_index` as a ``torch.sparse_csr`` tensor with
    unit weights, for message passing as one sparse-dense matmul. torch's
    beta and invariant-check notices on CSR tensors are not shown.

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> adj_t.to_dense()
        tensor([[0., 0., 0.],
                [1., 0., 0.],
                [1., 0., 0.]])
    """
    with _without_csr_notices():
        return to_torch_csr_tensor(
            edge_index.flip(0), torch.ones(edge_index.size(1), dtype=dtype), size=(num_nodes, num_nodes)
        )


class _MatmulWithTranspose(torch.autograd.Function):
    @staticmethod
    def forward(ctx, adj_t: Tensor, adj: Tensor, x: Tensor) -> Tensor:
        ctx.save_for_backward(adj)
        return adj_t @ x

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (adj,) = ctx.saved_tensors
        return None, None, adj @ grad_out


def matmul_with_transpose(adj_t: Tensor, adj: Tensor, x: Tensor) -> Tensor:
    r"""The sparse-dense product :math:`\mathbf{A}^{\top} \mathbf{X}` whose
    backward multiplies by the given :math:`\mathbf{A}` (``adj``, the
    transpose of ``adj_t`` in the same sparse layout) instead of transposing
    ``adj_t`` again on every call, as ``adj_t @ x`` does. Gradients flow to
    ``x`` only: the adjacency is treated as a constant.

    Shapes: ``adj_t [M, N]``, ``adj [N, M]``, ``x [N, F]`` give ``[M, F]``.

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> adj = csr_adjacency(torch.tensor([[1, 2], [0, 0]]), 3)
        >>> x = torch.randn(3, 2, requires_grad=True)
        >>> matmul_with_transpose(adj_t, adj, x).sum().backward()
        >>> x.grad  # node 0 sends to nodes 1 and 2
        tensor([[2., 2.],
                [0., 0.],
                [0., 0.]])
    """
    return _MatmulWithTranspose.apply(adj_t, adj, x)


def csr_transpose(adj_t: Tensor) -> Tensor:
    """The transpose of a ``torch.sparse_csr`` matrix, itself in CSR layout."""
    with _without_csr_notices():
        return adj_t.t().to_sparse_csr()


def csr_rows(adj_t: Tensor, ranges: Sequence[Tuple[int, int]]) -> Tensor:
    r"""The rows ``start:stop`` of each range of ``ranges`` of a
    ``torch.sparse_csr`` matrix, one block after the other, as a CSR matrix
    with all of ``adj_t``'s columns.

    Shapes: ``adj_t [M, N]`` gives ``[sum(stop - start), N]``.

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0, 2], [1, 2, 3]]), 4)
        >>> csr_rows(adj_t, [(1, 2), (3, 4)]).to_dense()
        tensor([[1., 0., 0., 0.],
                [0., 0., 1., 0.]])
    """
    crow, col, values = adj_t.crow_indices(), adj_t.col_indices(), adj_t.values()
    counts = [crow[start + 1 : stop + 1] - crow[start:stop] for start, stop in ranges]
    entries = [torch.arange(int(crow[start]), int(crow[stop]), device=col.device) for start, stop in ranges]
    taken = torch.cat(entries) if entries else col.new_zeros(0)
    rows = sum(stop - start for start, stop in ranges)
    new_crow = torch.cat([crow.new_zeros(1), torch.cat(counts).cumsum(0) if counts else crow.new_zeros(0)])
    with _without_csr_notices():
        return torch.sparse_csr_tensor(
            new_crow, col[taken], values[taken], size=(rows, adj_t.size(1)), dtype=values.dtype, device=values.device
        )
