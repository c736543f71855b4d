"""Weights of another layout (other names for the same tensors) are refused in one line naming the file."""

import pytest
import torch

from torch_wge.nn import WGE
from torch_wge.training.validation import StoredError, load_weights


def test_weights_under_other_names_are_refused_in_one_line():
    model = WGE(10, 2, hidden_channels=2, num_layers=1)
    earlier = {
        name.replace("entity_lin.", "entity_conv.lin.").replace("entity_bias", "entity_conv.bias"): value
        for name, value in model.state_dict().items()
    }
    assert "encoder.convs.0.entity_conv.lin.weight" in earlier
    with pytest.raises(StoredError, match=r"^run/best.pt: model: .*entity_conv") as error:
        load_weights(model, earlier, "run/best.pt")
    assert "\n" not in str(error.value)
    load_weights(model, {k: torch.zeros_like(v) for k, v in model.state_dict().items()}, "run/best.pt")
    assert all(v.abs().sum() == 0 for v in model.state_dict().values())
