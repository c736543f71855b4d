import torch

from torch_wge.utils.triples import add_inverse_triples, query_from_key, query_key


def test_inverse_triples_are_the_head_queries_of_each_triple():
    triples = torch.tensor([[0, 1, 2], [3, 0, 3], [4, 2, 1]])
    got = add_inverse_triples(triples, num_relations=3).tolist()
    want = [[h, r, t] for h, r, t in triples.tolist()] + [[t, r + 3, h] for h, r, t in triples.tolist()]
    assert got == want


def test_query_key_orders_by_entity_then_relation_and_is_undone():
    generator = torch.Generator().manual_seed(0)
    num_relations = 7
    entity = torch.randint(0, 50, (200,), generator=generator)
    relation = torch.randint(0, 2 * num_relations, (200,), generator=generator)
    key = query_key(entity, relation, num_relations)
    assert [part.tolist() for part in query_from_key(key, num_relations)] == [entity.tolist(), relation.tolist()]
    by_key = sorted(range(200), key=lambda i: int(key[i]))
    assert [(int(entity[i]), int(relation[i])) for i in by_key] == sorted(zip(entity.tolist(), relation.tolist()))
    assert torch.unique(key).numel() == len(set(zip(entity.tolist(), relation.tolist())))
