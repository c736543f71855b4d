import doctest

import pytest

from torch_wge.evaluation import evaluator, ranks, results


@pytest.mark.parametrize("module", [ranks, results, evaluator])
def test_docstring_examples(module):
    outcome = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert outcome.attempted > 0
    assert outcome.failed == 0
