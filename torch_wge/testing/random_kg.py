import torch
from torch import Tensor
from torch_geometric.data import Data


def random_kg(
    num_entities: int = 20,
    num_relations: int = 4,
    num_triples: int = 80,
    split: tuple[float, float] = (0.8, 0.1),
    seed: int = 0,
) -> Data:
    r"""A random knowledge graph in the layout of :mod:`torch_wge.datasets`.

    Triples are distinct; every entity and relation of the valid and test
    splits also occurs in the training split (the rest are moved to train).

    Returns:
        :class:`~torch_geometric.data.Data` with ``edge_index [2, E]``,
        ``edge_type [E]``, boolean ``train_mask``/``val_mask``/``test_mask``,
        ``num_nodes`` and ``num_relations``.
    """
    gen = torch.Generator().manual_seed(seed)
    triples = torch.stack(
        [
            torch.randint(num_entities, (4 * num_triples,), generator=gen),
            torch.randint(num_relations, (4 * num_triples,), generator=gen),
            torch.randint(num_entities, (4 * num_triples,), generator=gen),
        ],
        dim=1,
    )
    triples = triples[triples[:, 0] != triples[:, 2]]
    triples = torch.unique(triples, dim=0)
    triples = triples[torch.randperm(triples.size(0), generator=gen)[:num_triples]]
    num = triples.size(0)
    split_id = torch.full((num,), 2)
    split_id[: int(split[0] * num)] = 0
    split_id[int(split[0] * num) : int((split[0] + split[1]) * num)] = 1
    return kg_from_triples(triples, split_id, num_entities, num_relations)


def kg_from_triples(triples: Tensor, split_id: Tensor, num_entities: int, num_relations: int) -> Data:
    r"""Builds the :mod:`torch_wge.datasets` layout from ``triples [E, 3]``
    (head, relation, tail) and ``split_id [E]`` (0 train, 1 valid, 2 test).
    Evaluation triples whose head, tail or relation never occurs in train are
    moved to train, as the benchmark datasets guarantee."""
    train = triples[split_id == 0]
    seen_entity = torch.zeros(num_entities, dtype=torch.bool)
    seen_entity[train[:, 0]] = True
    seen_entity[train[:, 2]] = True
    seen_relation = torch.zeros(num_relations, dtype=torch.bool)
    seen_relation[train[:, 1]] = True
    unseen = ~(seen_entity[triples[:, 0]] & seen_entity[triples[:, 2]] & seen_relation[triples[:, 1]])
    split_id = split_id.masked_fill(unseen, 0)
    return Data(
        edge_index=triples[:, [0, 2]].t().contiguous(),
        edge_type=triples[:, 1].contiguous(),
        train_mask=split_id == 0,
        val_mask=split_id == 1,
        test_mask=split_id == 2,
        num_nodes=num_entities,
        num_relations=num_relations,
    )
