import pytest


@pytest.fixture(autouse=True)
def _single_thread(one_torch_thread):
    """Every test here runs with one torch thread (see tests/conftest.py)."""
