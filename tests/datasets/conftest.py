import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """These tests run many small tensor ops; on a shared 2-core machine two
    intra-op threads mostly wait for each other. Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
