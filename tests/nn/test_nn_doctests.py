import doctest

import pytest

from torch_wge.nn.conv import quaternion_gcn_conv, two_view_conv
from torch_wge.nn.models import two_view_encoder


@pytest.mark.parametrize("module", [quaternion_gcn_conv, two_view_conv, two_view_encoder])
def test_docstring_examples(module):
    outcome = doctest.testmod(module)
    assert outcome.attempted > 0
    assert outcome.failed == 0
