import torch

from torch_wge.utils.segments import expand_segments


def test_expand_segments_equals_a_loop_over_the_segments():
    torch.manual_seed(0)
    count = torch.randint(0, 4, (12,))
    start = torch.randint(0, 50, (12,))
    segment, position = expand_segments(start, count)
    expected = [(s, int(start[s]) + j) for s in range(12) for j in range(int(count[s]))]
    assert list(zip(segment.tolist(), position.tolist())) == expected
    empty = expand_segments(torch.tensor([3]), torch.tensor([0]))
    assert empty[0].numel() == empty[1].numel() == 0
