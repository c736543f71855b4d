"""Every docstring example in torch_wge runs as a doctest."""

import doctest
import importlib
import pkgutil

import pytest
import torch

import torch_wge

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(torch_wge.__path__, "torch_wge.") if info.name != "torch_wge.__main__"
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, one_torch_thread):
    module = importlib.import_module(name)
    torch.manual_seed(0)
    outcome = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, extraglobs={"torch": torch}
    )
    assert outcome.failed == 0


def test_every_public_layer_has_an_example():
    finder = doctest.DocTestFinder()
    for obj in (
        torch_wge.nn.QuaternionGCNConv,
        torch_wge.nn.TwoViewConv,
        torch_wge.nn.QuatEDecoder,
        torch_wge.nn.TwoViewEncoder,
        torch_wge.nn.WGE,
        torch_wge.nn.kge.QuatE,
        torch_wge.nn.kge.WGEKGE,
    ):
        assert any(test.examples for test in finder.find(obj)), obj.__name__
