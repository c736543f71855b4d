"""CSR helpers of torch_wge.utils.sparse against dense indexing."""

import pytest
import torch

from torch_wge.utils.sparse import csr_rows, csr_transpose


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
