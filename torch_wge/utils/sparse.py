import contextlib
import warnings
from typing import Iterator, List, Tuple

import torch
from torch import Tensor
from torch_geometric.typing import Adj
from torch_geometric.utils import is_torch_sparse_tensor, spmm, to_torch_csr_tensor

#: torch's one-time notices on creating a sparse CSR tensor; they say nothing about the tensor at hand.
CSR_NOTICES = ("Sparse CSR tensor support is in beta", "Sparse invariant checks are implicitly disabled")


@contextlib.contextmanager
def _without_csr_notices() -> Iterator[None]:
    with warnings.catch_warnings():
        for notice in CSR_NOTICES:
            warnings.filterwarnings("ignore", message=notice, category=UserWarning)
        yield


def check_ids(index: Tensor, count: int, name: str) -> None:
    """Raises :class:`ValueError` unless ``index`` is an integer tensor whose
    values lie in ``[0, count)``: torch's sparse kernels read out of bounds
    (garbage rows, or a crash) on ids they do not check themselves.

    Example:
        >>> check_ids(torch.tensor([0, 3]), 3, "rows")
        Traceback (most recent call last):
        ...
        ValueError: rows holds ids outside [0, 3): 0 to 3
    """
    if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer ids, got {index.dtype}")
    if index.numel() and not (int(index.min()) >= 0 and int(index.max()) < count):
        raise ValueError(f"{name} holds ids outside [0, {count}): {int(index.min())} to {int(index.max())}")


def csr_adjacency(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float) -> Tensor:
    r"""The transposed adjacency :math:`\mathbf{A}^{\top}` (row: target,
    column: source) of :obj:`edge_index` as a ``torch.sparse_csr`` tensor with
    unit weights, for message passing as one sparse-dense matmul. torch's
    beta and invariant-check notices on CSR tensors are not shown.

    Raises:
        ValueError: when :obj:`edge_index` is not ``[2, E]`` or holds an id
            outside ``[0, num_nodes)`` (negative ones too).

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> adj_t.to_dense()
        tensor([[0., 0., 0.],
                [1., 0., 0.],
                [1., 0., 0.]])
    """
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must be of shape [2, E], got {list(edge_index.shape)}")
    check_ids(edge_index, num_nodes, "edge_index")
    with _without_csr_notices():
        return to_torch_csr_tensor(
            edge_index.flip(0), torch.ones(edge_index.size(1), dtype=dtype), size=(num_nodes, num_nodes)
        )


def _is_half(dtype: torch.dtype) -> bool:
    """Whether ``dtype`` is one torch has no CPU sparse-dense matmul kernel for."""
    return dtype == torch.float16 or dtype == torch.bfloat16


def csr_matmul(adj: Tensor, x: Tensor) -> Tensor:
    r"""The product ``adj @ x`` of a ``torch.sparse_csr`` matrix and a dense one, without autograd.
    On the CPU it is written straight into a new tensor (``addmm`` with ``beta=0``, which reads
    nothing of it): ``adj @ x`` there zero-fills a tensor and copies it into the result before it
    adds the products, two passes over the whole output. On the CPU, ``float16`` and ``bfloat16``
    (which torch's CPU kernel does not take) are multiplied in ``float32`` and rounded back.

    Shapes: ``adj [M, N]`` and ``x [N, F]`` give ``[M, F]``.

    Example:
        >>> adj = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> csr_matmul(adj, torch.tensor([[1.0], [2.0], [4.0]])).flatten().tolist()
        [0.0, 1.0, 1.0]
    """
    if adj.device.type != "cpu" or adj.layout != torch.sparse_csr:
        return adj @ x
    if _is_half(x.dtype) or _is_half(adj.dtype):
        return csr_matmul(adj.to(torch.float32), x.to(torch.float32)).to(x.dtype)
    out = x.new_empty((adj.size(0), x.size(1)))
    return torch.addmm(out, adj, x, beta=0, out=out)


def sparse_matmul(adj_t: Adj, x: Tensor, reduce: str = "sum") -> Tensor:
    r"""PyG's :func:`~torch_geometric.utils.spmm` (differentiable), also for ``float16`` and
    ``bfloat16`` on the CPU: a ``torch.sparse`` product there is taken in ``float32`` (torch has no
    CPU kernel for those types) and rounded back to ``x``'s type.

    Shapes: ``adj_t [M, N]`` and ``x [N, F]`` give ``[M, F]``.

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3, dtype=torch.bfloat16)
        >>> sparse_matmul(adj_t, torch.tensor([[1.0], [2.0], [4.0]], dtype=torch.bfloat16)).flatten().tolist()
        [0.0, 1.0, 1.0]
    """
    if isinstance(adj_t, Tensor) and is_torch_sparse_tensor(adj_t) and adj_t.device.type == "cpu":
        if _is_half(x.dtype) or _is_half(adj_t.dtype):
            return spmm(adj_t.to(torch.float32), x.to(torch.float32), reduce).to(x.dtype)
    return spmm(adj_t, x, reduce)


def to_csr(adj: Tensor) -> Tensor:
    """A ``torch.sparse`` matrix in CSR layout (itself if it is), without torch's notices."""
    if adj.layout == torch.sparse_csr or torch.jit.is_scripting():
        return adj.to_sparse_csr()
    with _without_csr_notices():
        return adj.to_sparse_csr()


def csr_transpose(adj_t: Tensor) -> Tensor:
    """The transpose of a ``torch.sparse`` matrix, in CSR layout."""
    return to_csr(adj_t.t())


def csr_parts(adj: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Copies of the row pointers, column indices and values of a ``torch.sparse_csr`` matrix:
    plain tensors, which :func:`copy.deepcopy` copies (a sparse tensor it cannot) and
    :func:`torch.compile` takes as inputs (views into a sparse tensor it does not)."""
    return adj.crow_indices().clone(), adj.col_indices().clone(), adj.values().clone()


def csr_tensor(crow: Tensor, col: Tensor, values: Tensor, size: List[int]) -> Tensor:
    r"""The ``torch.sparse_csr`` matrix of ``size`` from its parts (:func:`csr_parts`), sharing
    their memory, without torch's notices on CSR tensors.

    Example:
        >>> adj = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> torch.equal(csr_tensor(*csr_parts(adj), [3, 3]).to_dense(), adj.to_dense())
        True
    """
    if torch.jit.is_scripting():
        return torch.sparse_csr_tensor(crow, col, values, size)
    with _without_csr_notices():
        return torch.sparse_csr_tensor(crow, col, values, size)


def in_function_transform() -> bool:
    """Whether a :mod:`torch.func` transform (``grad``, ``vjp``, ``jvp``, ``vmap``, ...) is running
    the caller: one check, for code that takes another path there. :obj:`False` under TorchScript.
    """
    if torch.jit.is_scripting():
        return False
    return torch._C._are_functorch_transforms_active()


def csr_edges(crow: Tensor, col: Tensor, values: Tensor) -> Tuple[Tensor, Tensor]:
    r"""The entries of a transposed adjacency :math:`\mathbf{A}^{\top}` in CSR layout, given by its
    parts (row pointers, column indices, values; :func:`csr_parts`), as ``(edge_index [2, nnz],
    edge_weight [nnz])``: row ``0`` the sources (its columns), row ``1`` the targets (its rows), in
    its order. Plain tensor operations, no sparse tensor: they run inside :mod:`torch.func`
    transforms too, and no value is synchronised with a device.

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> edge_index, edge_weight = csr_edges(*csr_parts(adj_t))
        >>> edge_index.tolist(), edge_weight.tolist()
        ([[0, 0], [1, 2]], [1.0, 1.0])
    """
    steps = torch.arange(crow.numel() - 1, device=crow.device, dtype=col.dtype)
    rows = torch.repeat_interleave(steps, crow.diff(), output_size=col.numel())
    return torch.stack([col, rows]), values


def sparse_edges(adj_t: Tensor) -> Tuple[Tensor, Tensor]:
    r"""A ``torch.sparse`` transposed adjacency ``adj_t`` (row: target, column: source) as
    ``(edge_index [2, nnz], edge_weight [nnz])`` (:func:`csr_edges`; another layout than CSR is
    coalesced in COO layout first), also inside a :mod:`torch.func` transform, where a sparse
    matrix can neither be made nor read (``torch.func.grad`` refuses even ``crow_indices()``:
    "Sparse CSR tensors do not have strides"): the matrix is read with the transforms switched
    off, a constant of theirs as every sparse matrix is.

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0], [1, 2]]), 3)
        >>> edge_index, edge_weight = sparse_edges(adj_t)
        >>> edge_index.tolist(), edge_weight.tolist()
        ([[0, 0], [1, 2]], [1.0, 1.0])
    """
    with torch._C._DisableFuncTorch():
        if adj_t.layout == torch.sparse_csr:
            parts = (adj_t.crow_indices().clone(), adj_t.col_indices().clone(), adj_t.values().clone())
        else:
            coo = adj_t.to_sparse_coo().coalesce()
            index, values = coo.indices(), coo.values().clone()
            return index.flip(0), values
    return csr_edges(*parts)


def csr_rows(adj_t: Tensor, rows: Tensor) -> Tensor:
    r"""The rows ``rows`` of a ``torch.sparse_csr`` matrix, in that order, as
    a CSR matrix with all of ``adj_t``'s columns.

    Shapes: ``adj_t [M, N]`` and ``rows [S]`` give ``[S, N]``.

    Raises:
        ValueError: when a row is outside ``[0, M)`` (negative ones too).

    Example:
        >>> adj_t = csr_adjacency(torch.tensor([[0, 0, 2], [1, 2, 3]]), 4)
        >>> csr_rows(adj_t, torch.tensor([3, 1])).to_dense()
        tensor([[0., 0., 1., 0.],
                [1., 0., 0., 0.]])
    """
    check_ids(rows, adj_t.size(0), "rows")
    crow, col, values = adj_t.crow_indices(), adj_t.col_indices(), adj_t.values()
    rows = rows.to(crow.device)
    first, counts = crow[rows], crow[rows + 1] - crow[rows]
    new_crow = torch.cat([crow.new_zeros(1), counts.cumsum(0)])
    # entry j of new row i is entry first[i] + j of adj_t
    taken = torch.repeat_interleave(first - new_crow[:-1], counts) + torch.arange(int(new_crow[-1]), device=crow.device)
    with _without_csr_notices():
        return torch.sparse_csr_tensor(
            new_crow,
            col[taken],
            values[taken],
            size=(rows.numel(), adj_t.size(1)),
            dtype=values.dtype,
            device=values.device,
        )
