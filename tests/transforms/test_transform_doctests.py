import doctest

import pytest

from torch_wge.transforms import entity_focused, levi, relation_focused, views


@pytest.mark.parametrize('module', [entity_focused, relation_focused, levi, views])
def test_docstring_examples(module):
    outcome = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert outcome.attempted > 0
    assert outcome.failed == 0
