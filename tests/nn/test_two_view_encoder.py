import pytest
import torch
from dense_two_view import randomize, tiny_kg_views, two_view_layer

from torch_wge.nn import TwoViewConv, TwoViewEncoder


@pytest.mark.parametrize("kwargs", [dict(), dict(relation_view=False), dict(entity_view=False), dict(quaternion=False)])
def test_stack_of_layers_matches_dense_equations(kwargs):
    torch.manual_seed(0)
    ef, rf = tiny_kg_views()
    encoder = TwoViewEncoder(8, num_layers=2, **kwargs).double()
    assert len(encoder.convs) == 2 and all(isinstance(conv, TwoViewConv) for conv in encoder.convs)
    for conv in encoder.convs:
        randomize(conv)
    encoder.eval()
    x, rel = torch.randn(5, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)
    states = encoder(x, rel, ef, rf)

    expected = [(x, rel)]
    for conv in encoder.convs:  # layer k + 1 reads layer k's entities and relations
        expected.append(two_view_layer(conv, *expected[-1], ef, rf))
    assert len(states) == 3
    for (got_x, got_r), (want_x, want_r) in zip(states, expected):
        assert torch.allclose(got_x, want_x, atol=1e-12)
        assert torch.allclose(got_r, want_r, atol=1e-12)


def test_new_state_dict_round_trip():
    encoder = TwoViewEncoder(8, 2)
    copy = TwoViewEncoder(8, 2)
    copy.load_state_dict(encoder.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(encoder.state_dict().values(), copy.state_dict().values()))


def test_errors_and_repr():
    ef, rf = tiny_kg_views()
    assert TwoViewEncoder(6, num_layers=1, quaternion=False)(torch.randn(5, 6), torch.randn(4, 6), ef, rf)[1][
        0
    ].shape == (
        5,
        6,
    )
    with pytest.raises(ValueError, match="multiple of 4"):
        TwoViewEncoder(6, num_layers=1)
    with pytest.raises(ValueError, match="num_layers >= 1"):
        TwoViewEncoder(8, num_layers=0)
    with pytest.raises(ValueError, match="no rf_edge_index"):
        TwoViewEncoder(8, num_layers=1)(torch.randn(5, 8), torch.randn(4, 8), ef)
    with pytest.raises(ValueError, match="at least one"):
        TwoViewEncoder(8, 1, entity_view=False, relation_view=False)
    assert repr(TwoViewEncoder(8, 2, relation_view=False)) == (
        "TwoViewEncoder(8, num_layers=2, layer=TwoViewConv(8, 8, entity_view=True, relation_view=False, quaternion=True))"
    )
