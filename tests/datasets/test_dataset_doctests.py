import doctest

from torch_wge.datasets import statistics


def test_docstring_examples():
    # The dataset classes' examples need downloads and are marked +SKIP.
    outcome = doctest.testmod(statistics, optionflags=doctest.ELLIPSIS)
    assert outcome.attempted > 0
    assert outcome.failed == 0
