"""torch_wge.nn.kge: QuatE and WGE behind PyG's KGEModel interface, and the
filtered evaluator on PyG kge models."""

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.nn.kge import ComplEx, DistMult, KGEModel, RotatE, TransE

from torch_wge.data import kg_triples
from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.nn import WGE
from torch_wge.nn.kge import WGEKGE, QuatE
from torch_wge.testing import random_kg
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


def hamilton(q, p):
    """One quaternion (a, b, c, d) times another, written out."""
    a1, b1, c1, d1 = q
    a2, b2, c2, d2 = p
    return (
        a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2,
        a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2,
        a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2,
        a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2,
    )


def test_quate_score_is_hand_computed():
    torch.manual_seed(0)
    model = QuatE(num_nodes=4, num_relations=2, hidden_channels=3).double()
    assert isinstance(model, KGEModel) and model.node_emb.weight.shape == (4, 12)
    head, rel, tail = torch.tensor([0, 3]), torch.tensor([1, 0]), torch.tensor([2, 1])
    scores = model(head, rel, tail)
    for b in range(2):
        e_h, e_r, e_t = (
            w.view(4, 3)
            for w in (model.node_emb.weight[head[b]], model.rel_emb.weight[rel[b]], model.node_emb.weight[tail[b]])
        )
        expected = 0.0
        for k in range(3):  # quaternion k: components in blocks r | i | j | k
            r = e_r[:, k] / e_r[:, k].norm()
            expected += sum(x * y for x, y in zip(hamilton(e_h[:, k].tolist(), r.tolist()), e_t[:, k].tolist()))
        assert scores[b].item() == pytest.approx(expected, abs=1e-12)


def pyg_training_loop(model, data, epochs):
    """PyG's examples/kge_fb15k_237.py loop, unchanged but for its sizes."""
    head, tail = data.edge_index[:, data.train_mask]
    rel = data.edge_type[data.train_mask]
    loader = model.loader(head_index=head, rel_type=rel, tail_index=tail, batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(epochs):
        model.train()
        for batch in loader:
            optimizer.zero_grad()
            loss = model.loss(*batch)
            loss.backward()
            optimizer.step()
    model.eval()
    return model.test(head_index=head, rel_type=rel, tail_index=tail, batch_size=1000, k=10, log=False)


@pytest.mark.parametrize("cls", [ComplEx, QuatE])
def test_quate_runs_code_written_for_complex(cls, one_torch_thread):
    data = random_kg(40, 3, 300, seed=2)
    torch.manual_seed(0)
    model = cls(data.num_nodes, data.num_relations, hidden_channels=16)
    untrained = model.test(*kg_triples(data, "train").t()[[0, 1, 2]], batch_size=1000, k=10, log=False)
    mean_rank, mrr, hits = pyg_training_loop(model, data, epochs=40)
    # a random order of 40 entities has MRR about 0.1; fitting the training triples beats it clearly
    assert untrained[1] < 0.25 and mrr > 2 * untrained[1] and hits > 0.6


def test_wge_forward_refuses_a_tail_index():
    model = WGE(5, 2, hidden_channels=2, num_layers=0)
    h, r, t = torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([2, 3])
    with pytest.raises(ValueError, match=r"got ef_edge_index of shape \[2\].*WGEKGE"):
        model(h, r, t)


@pytest.fixture(scope="module")
def kg():
    data = random_kg(25, 3, 150, seed=4)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(data)


def test_wgekge_forward_and_loss_are_wge(kg):
    torch.manual_seed(0)
    model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1, dropout=0.0).double().eval()
    wge = model.wge
    head, rel, tail = torch.tensor([0, 4, 9]), torch.tensor([0, 1, 2]), torch.tensor([3, 3, 1])
    scores = model(head, rel, tail)
    full = wge.score_all(wge.encode(**wge.graph_inputs(kg)), head, rel)
    assert scores.shape == (3,)
    assert torch.allclose(scores, full[torch.arange(3), tail])
    # the loss: both directions of every triple as 1-N queries
    loss = model.loss(head, rel, tail)
    positives = torch.tensor([[0, 1, 2, 3, 4, 5], [3, 3, 1, 0, 4, 9]])
    expected = wge.loss(
        wge.encode(**wge.graph_inputs(kg)),
        torch.tensor([0, 4, 9, 3, 3, 1]),
        torch.tensor([0, 1, 2, 3, 4, 5]),
        positives,
    )
    assert torch.allclose(loss, expected)
    assert model.node_emb is wge.entity_embedding
    # PyG's raw (unfiltered) tail ranking: the rank of each tail among the 1-N scores of its query
    mean_rank, mrr, hits = model.test(head, rel, tail, batch_size=25, log=False)
    rank = 1 + (full > full[torch.arange(3), tail].view(-1, 1)).sum(dim=1).double()
    assert mrr == pytest.approx(rank.reciprocal().mean().item(), abs=1e-6)  # PyG averages in float32
    assert mean_rank == pytest.approx(rank.mean().item() - 1, abs=1e-5)  # PyG counts ranks from 0


def brute_force_ranks(model, evaluator, known):
    """Realistic filtered ranks, one triple and one candidate at a time."""
    R, N = evaluator.num_relations, evaluator.num_entities
    known = set(map(tuple, known.tolist()))
    ranks = []
    for e, r, target in zip(
        evaluator.query_entity.tolist(), evaluator.query_relation.tolist(), evaluator.query_target.tolist()
    ):

        def triple(n):
            return (e, r, n) if r < R else (n, r - R, e)

        score = {n: model(*(torch.tensor([v]) for v in triple(n))).item() for n in range(N)}
        others = [n for n in range(N) if n != target and triple(n) not in known]
        better = sum(score[n] > score[target] for n in others)
        ties = sum(score[n] == score[target] for n in others)
        ranks.append(1 + better + ties / 2)
    return torch.tensor(ranks)


@pytest.mark.parametrize("cls", [DistMult, ComplEx, TransE, RotatE, QuatE])
def test_evaluator_on_pyg_kge_models_matches_brute_force(cls, one_torch_thread):
    data = random_kg(12, 2, 40, seed=5)
    torch.manual_seed(0)
    model = cls(12, 2, hidden_channels=4).double().eval()
    evaluator = LinkPredictionEvaluator.from_data(data, "test")
    calls = []
    model.register_forward_hook(lambda *args: calls.append(1))
    ranks = evaluator.compute_ranks(model, batch_size=4)
    # RotatE: all 12 candidates of 4 queries per forward call, no loop over queries;
    # the others score all candidates from their embedding matrices, without forward
    assert len(calls) == (-(-evaluator.num_queries // 4) if cls is RotatE else 0)
    assert torch.allclose(ranks, brute_force_ranks(model, evaluator, kg_triples(data, "all")))


def test_evaluator_on_wgekge_uses_its_1_n_scores(kg):
    torch.manual_seed(0)
    model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1).eval()
    evaluator = LinkPredictionEvaluator.from_data(kg, "test")
    encoded = model.wge.encode(**model.wge.graph_inputs(kg))
    expected = evaluator.evaluate(lambda e, r: model.wge.score_all(encoded, e, r))
    assert evaluator.evaluate(model)["both.mrr"] == expected["both.mrr"]
    wrong = WGEKGE(25, 4, hidden_channels=2, data=kg, num_layers=1).eval()
    with pytest.raises(ValueError, match="num_relations=4"):
        evaluator.evaluate(wrong)


def test_wgekge_encodes_once_per_evaluation(kg):
    torch.manual_seed(0)
    model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1).eval()
    encodings = []
    model.wge.encoder.register_forward_hook(lambda *args: encodings.append(1))
    head, rel, tail = torch.tensor([0, 4, 9, 2]), torch.tensor([0, 1, 2, 0]), torch.tensor([3, 3, 1, 7])
    with torch.no_grad():
        first = model.test(head, rel, tail, batch_size=5, log=False)  # 4 triples x 5 tail batches
    assert len(encodings) == 1
    # a parameter change (an optimizer step) is seen: the next evaluation encodes again
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model.train()
    model.loss(head, rel, tail).backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        second = model.test(head, rel, tail, batch_size=5, log=False)
        assert len(encodings) == 3  # the training step's encoding and one for the evaluation
        full = model.wge.score_all(model.wge.encode(**model.wge.graph_inputs(kg)), head, rel)
    rank = (full > full[torch.arange(4), tail].view(-1, 1)).sum(dim=1).double()
    assert second[1] == pytest.approx((1 / (rank + 1)).mean().item(), abs=1e-6) and second != first
