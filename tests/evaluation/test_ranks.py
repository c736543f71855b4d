import math

import pytest
import torch

from torch_wge.evaluation import RANK_TYPES, all_filtered_ranks, filtered_ranks


def brute_force_ranks(scores, targets, filter_index, rank_type):
    """Rank by looping over every candidate in Python."""
    scores = scores.tolist()
    filtered = {}
    if filter_index is not None:
        for row, col in filter_index.t().tolist():
            filtered.setdefault(row, set()).add(col)
    out = []
    for row, target in enumerate(targets.tolist()):
        removed = filtered.get(row, set()) - {target}
        target_score = scores[row][target]
        greater = at_least = 0
        for col, value in enumerate(scores[row]):
            if col in removed:
                continue
            greater += value > target_score
            at_least += value >= target_score
        optimistic, pessimistic = 1 + greater, at_least
        out.append(
            {
                "optimistic": optimistic,
                "pessimistic": pessimistic,
                "realistic": (optimistic + pessimistic) / 2,
            }[rank_type]
        )
    return torch.tensor(out, dtype=torch.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("rank_type", RANK_TYPES)
def test_against_brute_force_with_ties(seed, rank_type):
    gen = torch.Generator().manual_seed(seed)
    num_rows, num_entities = 13, 17
    # Scores from a few integer values: many ties.
    scores = torch.randint(0, 4, (num_rows, num_entities), generator=gen).float()
    targets = torch.randint(0, num_entities, (num_rows,), generator=gen)
    num_filter = 60
    filter_index = torch.stack(
        [
            torch.randint(0, num_rows, (num_filter,), generator=gen),
            torch.randint(0, num_entities, (num_filter,), generator=gen),
        ]
    )
    # Make sure some filter pairs hit the targets (they must be ignored)
    # and some pairs are repeated.
    filter_index = torch.cat([filter_index, torch.stack([torch.arange(5), targets[:5]]), filter_index[:, :10]], dim=1)
    expected = brute_force_ranks(scores, targets, filter_index, rank_type)
    actual = filtered_ranks(scores, targets, filter_index, rank_type=rank_type)
    assert torch.equal(actual, expected)
    unfiltered = filtered_ranks(scores, targets, rank_type=rank_type)
    assert torch.equal(unfiltered, brute_force_ranks(scores, targets, None, rank_type))


def test_hand_worked_example():
    scores = torch.tensor(
        [
            [1.0, 3.0, 3.0, 2.0, 3.0],
            [0.0, 0.0, 5.0, 0.0, 1.0],
            [2.0, 2.0, 2.0, 2.0, 2.0],
        ]
    )
    targets = torch.tensor([1, 3, 4])
    # (1, 3) is the target of row 1: ignored.
    filter_index = torch.tensor([[0, 1, 1, 2], [2, 2, 3, 0]])
    ranks = all_filtered_ranks(scores, targets, filter_index)
    # row 0: target 3.0 among {0, 1, 3, 4}: none above, {1, 4} at least -> 1, 2
    # row 1: target 0.0 among {0, 1, 3, 4}: {4} above, all 4 at least -> 2, 4
    # row 2: target 2.0 among {1, 2, 3, 4}: none above, all 4 at least -> 1, 4
    assert ranks.optimistic.tolist() == [1.0, 2.0, 1.0]
    assert ranks.pessimistic.tolist() == [2.0, 4.0, 4.0]
    assert ranks.realistic.tolist() == [1.5, 3.0, 2.5]
    assert ranks.num_candidates.tolist() == [4.0, 4.0, 4.0]
    # Unfiltered: row 0 ties with 2 and 4, row 1 is beaten by 2 and 4.
    assert filtered_ranks(scores, targets).tolist() == [2.0, 4.0, 3.0]
    assert filtered_ranks(scores, targets, rank_type="optimistic").tolist() == [1.0, 3.0, 1.0]


def test_constant_scores_get_middle_rank():
    num_rows, num_entities = 4, 9
    scores = torch.full((num_rows, num_entities), 0.7)
    targets = torch.tensor([0, 3, 8, 5])
    # Three non-target entities filtered per row -> 6 candidates left.
    filter_index = torch.tensor([[0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3], [1, 2, 3, 0, 1, 2, 0, 1, 2, 0, 1, 2]])
    ranks = filtered_ranks(scores, targets, filter_index)
    assert ranks.tolist() == [(6 + 1) / 2] * num_rows
    assert filtered_ranks(scores, targets).tolist() == [(num_entities + 1) / 2] * num_rows


def test_nan_ranks_worst_and_ties_with_nan():
    nan = float("nan")
    scores = torch.tensor([[nan, 1.0, nan, 0.5], [nan, 1.0, nan, 0.5]])
    ranks = all_filtered_ranks(scores, torch.tensor([1, 0]))
    # NaN candidates never beat a number; a NaN target loses to every number
    # and ties with the other NaN.
    assert ranks.optimistic.tolist() == [1.0, 3.0]
    assert ranks.pessimistic.tolist() == [1.0, 4.0]
    filtered = all_filtered_ranks(scores, torch.tensor([1, 0]), torch.tensor([[1, 1], [2, 3]]))
    assert filtered.optimistic.tolist() == [1.0, 2.0]
    assert filtered.pessimistic.tolist() == [1.0, 2.0]


def test_filtered_entries_do_not_tie_with_minus_infinity_target():
    inf = math.inf
    scores = torch.tensor([[-inf, -inf, 0.0, -inf]])
    ranks = all_filtered_ranks(scores, torch.tensor([0]), torch.tensor([[0], [1]]))
    assert ranks.optimistic.tolist() == [2.0]
    assert ranks.pessimistic.tolist() == [3.0]  # ties with entity 3, not with filtered 1


def test_input_checks():
    scores = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 3\)"):
        filtered_ranks(scores, torch.tensor([0, 3]))
    with pytest.raises(ValueError, match=r"targets must have shape \[2\]"):
        filtered_ranks(scores, torch.tensor([0]))
    with pytest.raises(ValueError, match=r"filter_index rows must lie in \[0, 2\)"):
        filtered_ranks(scores, torch.tensor([0, 1]), torch.tensor([[2], [0]]))
    with pytest.raises(ValueError, match="rank_type must be one of"):
        filtered_ranks(scores, torch.tensor([0, 1]), rank_type="mean")
    with pytest.raises(ValueError, match=r"scores must have shape \[B, N\]"):
        filtered_ranks(torch.zeros(3), torch.tensor([0]))


def test_empty_and_dtypes():
    assert filtered_ranks(torch.zeros(0, 5), torch.zeros(0, dtype=torch.long)).numel() == 0
    empty_filter = torch.zeros(2, 0, dtype=torch.long)
    ranks = filtered_ranks(torch.tensor([[1, 2, 3]]), torch.tensor([0]), empty_filter)
    assert ranks.tolist() == [3.0]
    half = torch.tensor([[0.5, 0.25, 0.5]], dtype=torch.bfloat16)
    assert filtered_ranks(half, torch.tensor([0])).tolist() == [1.5]
