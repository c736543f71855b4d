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
