import warnings

import torch
from torch import Tensor
from torch_geometric.utils import to_torch_csr_tensor

#: torch's one-time notices on creating a sparse CSR tensor; they say nothing about the tensor at hand.
CSR_NOTICES = ("Sparse CSR tensor support is in beta", "Sparse invariant checks are implicitly disabled")


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
    with warnings.catch_warnings():
        for notice in CSR_NOTICES:
            warnings.filterwarnings("ignore", message=notice, category=UserWarning)
        return to_torch_csr_tensor(
            edge_index.flip(0), torch.ones(edge_index.size(1), dtype=dtype), size=(num_nodes, num_nodes)
        )
