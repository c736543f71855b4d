"""CSR helpers of torch_wge.utils.sparse against dense indexing."""

import pytest
import torch

from torch_wge.utils.sparse import csr_matmul, csr_rows, csr_transpose


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")  # the dense reference's to_sparse_csr
def test_csr_rows_are_the_dense_rows_in_the_given_order():
    generator = torch.Generator().manual_seed(0)
    dense = torch.rand(9, 7, generator=generator, dtype=torch.float64)
    dense[dense < 0.6] = 0
    dense[4] = 0  # an empty row
    adj = dense.to_sparse_csr()
    for rows in ([8, 0, 4, 4, 2], [4], [], list(range(9))):
        index = torch.tensor(rows, dtype=torch.long)
        picked = csr_rows(adj, index)
        assert picked.layout == torch.sparse_csr and picked.shape == (len(rows), 7)
        assert torch.equal(picked.to_dense(), dense[index])
        assert torch.equal(csr_transpose(picked).to_dense(), dense[index].t())


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_csr_matmul_is_the_dense_product_whatever_the_new_tensor_held(monkeypatch, dtype):
    generator = torch.Generator().manual_seed(1)
    dense = torch.rand(9, 7, generator=generator, dtype=torch.float64)
    dense[dense < 0.6] = 0
    dense[[2, 5]] = 0  # empty rows: their outputs are never written by a product
    x = torch.randn(7, 5, generator=generator, dtype=torch.float64)
    # the output tensor arrives full of NaN, as uninitialised memory may
    monkeypatch.setattr(torch.Tensor, "new_empty", lambda self, size: torch.full(size, float("nan"), dtype=self.dtype))
    product = csr_matmul(dense.to(dtype).to_sparse_csr(), x.to(dtype))
    assert product.dtype == dtype and product.shape == (9, 5)
    torch.testing.assert_close(product.double(), dense @ x, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize(
    "edge_index, message",
    [
        ([[0, 10**7], [1, 2]], r"edge_index holds ids outside \[0, 3\): 0 to 10000000"),  # was a segfault
        ([[0, 3], [1, 2]], r"edge_index holds ids outside \[0, 3\): 0 to 3"),  # a source id == num_nodes
        ([[0, -1], [1, 2]], r"edge_index holds ids outside \[0, 3\): -1 to 2"),  # was garbage rows
        ([[0, 1], [1, 5]], r"edge_index holds ids outside \[0, 3\)"),  # a target out of range
        ([0, 1], r"edge_index must be of shape \[2, E\]"),
    ],
)
def test_csr_adjacency_refuses_ids_outside_the_nodes(edge_index, message):
    from torch_wge.utils.sparse import csr_adjacency

    with pytest.raises(ValueError, match=message):
        csr_adjacency(torch.tensor(edge_index), 3)
    with pytest.raises(ValueError, match="integer ids"):
        csr_adjacency(torch.tensor([[0.0, 1.0], [1.0, 2.0]]), 3)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
@pytest.mark.parametrize("rows", [[-1], [-3], [9], [0, 9]])
def test_csr_rows_refuses_rows_outside_the_matrix(rows):
    adj = torch.eye(9).to_sparse_csr()
    with pytest.raises(ValueError, match=r"rows holds ids outside \[0, 9\)"):
        csr_rows(adj, torch.tensor(rows))


def _random_csr(rows, cols, seed, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    dense = torch.rand(rows, cols, generator=generator, dtype=torch.float64)
    dense[dense < 0.5] = 0
    dense[1] = 0  # an empty row
    return dense, dense.to(dtype).to_sparse_csr()


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
def test_matmul_with_transpose_gradcheck_and_gradgradcheck_float64():
    from torch_wge.utils.autograd import MatmulWithTranspose, matmul_with_transpose

    dense, adj_t = _random_csr(6, 5, seed=2)
    adj = csr_transpose(adj_t)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    product = lambda x: MatmulWithTranspose.apply(adj_t, adj, x)
    assert torch.autograd.gradcheck(product, (x,), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(product, (x,))
    # through a non-linear function too, whose second derivative the product's backward carries
    assert torch.autograd.gradgradcheck(lambda x: product(x.tanh()).pow(3), (x,))
    torch.testing.assert_close(product(x), dense @ x, rtol=0, atol=1e-15)
    # an adjacency requiring a gradient itself is multiplied with plain autograd: no gradient is lost
    values = adj_t.values().clone().requires_grad_()
    weighted = torch.sparse_csr_tensor(adj_t.crow_indices(), adj_t.col_indices(), values, adj_t.shape)
    matmul_with_transpose(weighted, adj, x).sum().backward()
    assert values.grad is not None and values.grad.abs().sum() > 0


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_are_multiplied_in_float32_on_the_cpu(dtype):
    from torch_wge.utils.sparse import sparse_matmul

    dense, adj_t = _random_csr(6, 5, seed=3, dtype=dtype)
    x = torch.randn(5, 4, dtype=torch.float64).to(dtype)
    expected = (dense.to(dtype).float() @ x.float()).to(dtype)  # what one rounding of the float32 product gives
    assert torch.equal(csr_matmul(adj_t, x), expected)
    x.requires_grad_()
    out = sparse_matmul(adj_t, x)
    assert out.dtype == dtype and torch.equal(out, expected)
    out.float().sum().backward()
    assert x.grad.dtype == dtype
    torch.testing.assert_close(
        x.grad.float(), dense.to(dtype).float().sum(0).view(-1, 1).expand(5, 4), rtol=1e-2, atol=1e-2
    )


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
def test_csr_parts_copy_deep_and_rebuild_the_matrix():
    import copy

    from torch_wge.utils.sparse import csr_parts, csr_tensor, to_csr

    dense, adj_t = _random_csr(6, 5, seed=4)
    parts = copy.deepcopy(csr_parts(adj_t))  # a sparse tensor itself cannot be deep-copied
    assert torch.equal(csr_tensor(*parts, [6, 5]).to_dense(), dense)
    assert to_csr(adj_t) is adj_t or torch.equal(to_csr(adj_t).to_dense(), dense)
    assert torch.equal(to_csr(adj_t.to_sparse_coo()).to_dense(), dense)
