"""torch_wge.nn.kge: QuatE and WGE behind PyG's KGEModel interface, and the
filtered evaluator on PyG kge models."""

import copy
import inspect
import pickle

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn.kge import ComplEx, DistMult, KGEModel, RotatE, TransE

from torch_wge.data import kg_triples
from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.nn import WGE, OneToNLoss
from torch_wge.nn.kge import WGEKGE, QuatE
from torch_wge.testing import random_kg
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform
from torch_wge.utils.quaternion import hamilton_product


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
    assert list(model.state_dict()) == ["node_emb.weight", "rel_emb.weight"]  # the names of saved checkpoints
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


def reference_scores(h, r, t):
    """QuatE scores of rows ``h, r, t [B, 4n]`` (r not normalised), one quaternion at a time."""
    n = h.size(1) // 4
    scores = []
    for b in range(h.size(0)):
        total = 0.0
        for k in range(n):
            q = hamilton(h[b, k::n].tolist(), r[b, k::n].tolist())
            total += sum(x * y for x, y in zip(q, t[b, k::n].tolist()))
        scores.append(total)
    return torch.tensor(scores, dtype=torch.float64)


def test_quate_gradients_match_the_sixteen_real_products():
    torch.manual_seed(0)
    model = QuatE(num_nodes=6, num_relations=5, hidden_channels=3).double()
    head, rel, tail = torch.tensor([0, 5, 2]), torch.tensor([4, 1, 1]), torch.tensor([2, 2, 3])
    weights = torch.randn(3, dtype=torch.float64)
    got = torch.autograd.grad((weights * model(head, rel, tail)).sum(), list(model.parameters()))
    x, w = model.node_emb.weight, model.rel_emb.weight
    unit = (w.view(5, 4, 3) / w.view(5, 4, 3).norm(dim=1, keepdim=True)).flatten(1)
    reference = (weights * (hamilton_product(x[head], unit[rel]) * x[tail]).sum(-1)).sum()
    for g, e in zip(got, torch.autograd.grad(reference, [x, w])):
        assert torch.allclose(g, e, atol=1e-12)


def test_quate_forward_is_the_score_of_the_unit_relations_for_any_index_shape():
    torch.manual_seed(0)
    model = QuatE(num_nodes=6, num_relations=5, hidden_channels=3).double()
    x, w = model.node_emb.weight, model.rel_emb.weight
    unit = (w.view(5, 4, 3) / w.view(5, 4, 3).norm(dim=1, keepdim=True)).flatten(1)
    # fewer relation ids than relations (rows normalised after the lookup) and more (the table first)
    for head, rel, tail in [
        (torch.tensor([0, 5]), torch.tensor([4, 1]), torch.tensor([2, 2])),
        (torch.arange(6), torch.tensor([0, 1, 2, 3, 4, 4]), torch.tensor([5, 4, 3, 2, 1, 0])),
    ]:
        assert torch.allclose(model(head, rel, tail), reference_scores(x[head], unit[rel], x[tail]), atol=1e-12)
    # broadcasting ids: [3, 1] heads and relations against [1, 4] tails
    head, rel, tail = torch.tensor([[0], [3], [5]]), torch.tensor([[1], [0], [4]]), torch.tensor([[1, 2, 3, 4]])
    scores = model(head, rel, tail)
    assert scores.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            expected = reference_scores(x[head[i]], unit[rel[i]], x[tail[0, j]].view(1, -1))
            assert scores[i, j].item() == pytest.approx(expected.item(), abs=1e-12)


def test_quate_loss_is_bce_of_the_positives_and_the_sampled_negatives():
    torch.manual_seed(0)
    model = QuatE(num_nodes=9, num_relations=3, hidden_channels=2).double()
    head, rel, tail = torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 2, 0]), torch.tensor([4, 5, 6, 7])
    torch.manual_seed(1)
    neg_head, neg_rel, neg_tail = model.random_sample(head, rel, tail)
    x, w = model.node_emb.weight, model.rel_emb.weight
    unit = (w.view(3, 4, 2) / w.view(3, 4, 2).norm(dim=1, keepdim=True)).flatten(1)
    pos = (hamilton_product(x[head], unit[rel]) * x[tail]).sum(-1)
    neg = (hamilton_product(x[neg_head], unit[neg_rel]) * x[neg_tail]).sum(-1)
    expected = -(F.logsigmoid(pos).sum() + F.logsigmoid(-neg).sum()) / 8
    expected_grads = torch.autograd.grad(expected, (x, w))
    torch.manual_seed(1)
    loss = model.loss(head, rel, tail)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-12)
    for g, e in zip(torch.autograd.grad(loss, (x, w)), expected_grads):
        assert torch.allclose(g, e, atol=1e-12)


def test_quate_sparse_gradients_equal_the_dense_ones():
    torch.manual_seed(0)
    dense = QuatE(num_nodes=7, num_relations=3, hidden_channels=2).double()
    sparse = QuatE(num_nodes=7, num_relations=3, hidden_channels=2, sparse=True).double()
    sparse.load_state_dict(dense.state_dict())
    head, rel, tail = torch.tensor([0, 1, 2, 3, 4]), torch.tensor([0, 1, 2, 0, 1]), torch.tensor([6, 5, 4, 3, 2])
    for model in (dense, sparse):
        model(head, rel, tail).square().sum().backward()
    for name in ("node_emb", "rel_emb"):
        grad = getattr(sparse, name).weight.grad
        assert grad.is_sparse
        assert torch.allclose(grad.to_dense(), getattr(dense, name).weight.grad, atol=1e-12)
    torch.optim.SparseAdam(list(sparse.parameters())).step()  # what sparse=True is for


def pyg_test(model, head, rel, tail, k):
    """PyG's KGEModel.test: N forward calls of one query each, ranks from a sort."""
    return KGEModel.test(model, head, rel, tail, batch_size=7, k=k, log=False)


@pytest.mark.parametrize("batch_size", [1, 60])  # one query per chunk, and several
def test_quate_test_gives_pygs_results(batch_size):
    torch.manual_seed(0)
    model = QuatE(num_nodes=15, num_relations=3, hidden_channels=2).double().eval()
    head, rel, tail = torch.randint(15, (20,)), torch.randint(3, (20,)), torch.randint(15, (20,))
    assert model.test(head, rel, tail, batch_size=batch_size, k=3, log=False) == pyg_test(model, head, rel, tail, k=3)


def test_quate_test_gives_tied_tails_their_realistic_rank():
    torch.manual_seed(0)
    model = QuatE(num_nodes=6, num_relations=1, hidden_channels=1).double().eval()
    with torch.no_grad():
        model.node_emb.weight[4] = model.node_emb.weight[2]  # entities 2 and 4 always tie
    head, rel, tail = torch.tensor([0, 0]), torch.tensor([0, 0]), torch.tensor([2, 4])
    scores = model(torch.zeros(6, dtype=torch.long), torch.zeros(6, dtype=torch.long), torch.arange(6))
    ahead = int((scores > scores[2]).sum())  # the other four entities do not tie with 2 and 4
    assert scores[2] == scores[4] and int((scores == scores[2]).sum()) == 2
    mean_rank, mrr, hits = model.test(head, rel, tail, batch_size=1, k=ahead + 1, log=False)
    # both tails could stand at position ahead or ahead + 1 (from 0): each gets ahead + 0.5
    assert mean_rank == pytest.approx(ahead + 0.5) and mrr == pytest.approx(1 / (ahead + 1.5))
    assert hits == 0.0  # a realistic rank ahead + 1.5 (from 1) is not within k = ahead + 1
    assert model.test(head, rel, tail, batch_size=1, k=ahead + 2, log=False)[2] == 1.0


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
    expected = OneToNLoss()(
        wge,
        wge.encode(**wge.graph_inputs(kg)),
        torch.tensor([0, 4, 9, 3, 3, 1]),
        torch.tensor([0, 1, 2, 3, 4, 5]),
        positives,
    )
    assert torch.allclose(loss, expected)
    assert (
        model.node_emb.weight is wge.entity_embedding.weight and model.rel_emb.weight is wge.relation_embedding.weight
    )
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


def test_wgekge_test_gives_pygs_results(kg):
    from torch_geometric.nn.kge import KGEModel

    torch.manual_seed(0)
    model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1).eval()
    head, rel, tail = kg_triples(kg, "test").t()
    for batch_size in (7, 1000):  # PyG's forward calls per triple: 4, or 1; our query chunks: 2, or all
        ours = model.test(head, rel, tail, batch_size=batch_size, log=False)
        pyg = KGEModel.test(model, head, rel, tail, batch_size=batch_size, log=False)  # forward per candidate batch
        assert ours[0] == pytest.approx(pyg[0]) and ours[1] == pytest.approx(pyg[1]) and ours[2] == pyg[2]


def test_wgekge_given_another_graph_encodes_that_graph(kg):
    other = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(random_kg(25, 3, 150, seed=9))
    torch.manual_seed(0)
    model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1, alpha0=0.0).eval()  # scores from the encoder
    head, rel, tail = torch.tensor([0, 4, 9]), torch.tensor([0, 1, 2]), torch.tensor([3, 3, 1])
    with torch.no_grad():
        on_kg = model(head, rel, tail)
        model.data = other
        on_other = model(head, rel, tail)
        expected = model.wge.score_triples(model.wge.encode(**model.wge.graph_inputs(other)), head, rel, tail)
    assert torch.allclose(on_other, expected, atol=1e-6) and not torch.allclose(on_other, on_kg, atol=1e-4)


def test_wgekge_loss_refuses_relations_outside_the_graph(kg):
    model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1)
    for bad in (3, -1, 5):  # query keys e * 2R + r: these would silently become other queries
        with pytest.raises(ValueError, match=r"outside the relations \[0, 3\)"):
            model.loss(torch.tensor([0]), torch.tensor([bad]), torch.tensor([1]))


# ------------------------------------------- parameters in use, copies, torch.func, second order


def written_out_quate(params, head, rel, tail):
    """QuatE scores from a parameter dict, the Hamilton product written out on tensors (plain autograd)."""
    x, w = params["node_emb.weight"], params["rel_emb.weight"]
    n = x.size(1) // 4
    (a, b, c, d), (p, q, u, v), t = x[head].view(-1, 4, n).unbind(1), w[rel].view(-1, 4, n).unbind(1), x[tail]
    norm = torch.sqrt(p * p + q * q + u * u + v * v)
    p, q, u, v = p / norm, q / norm, u / norm, v / norm
    query = torch.cat(
        [
            a * p - b * q - c * u - d * v,
            a * q + b * p + c * v - d * u,
            a * u - b * v + c * p + d * q,
            a * v + b * u - c * q + d * p,
        ],
        dim=1,
    )
    return (query * t).sum(-1)


HEAD, REL, TAIL = torch.tensor([0, 4, 5, 2]), torch.tensor([1, 0, 2, 1]), torch.tensor([3, 3, 1, 0])


def other_parameters(model, seed):
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.randn(p.shape, dtype=p.dtype, generator=generator) / 2 for name, p in model.named_parameters()}


def test_quate_under_functional_call_and_torch_func_is_the_written_out_score():
    torch.manual_seed(0)
    model = QuatE(num_nodes=6, num_relations=3, hidden_channels=2).double()
    for seed in (1, 2):  # a second call with other parameters scores with those
        params = other_parameters(model, seed)
        scores = torch.func.functional_call(model, params, (HEAD, REL, TAIL))
        assert torch.allclose(scores, written_out_quate(params, HEAD, REL, TAIL), atol=1e-12)
        weights = torch.randn(4, dtype=torch.float64)
        ours = torch.func.grad(
            lambda p: (torch.func.functional_call(model, p, (HEAD, REL, TAIL)) * weights).pow(2).sum()
        )(params)
        leaves = {name: p.clone().requires_grad_() for name, p in params.items()}
        reference = (written_out_quate(leaves, HEAD, REL, TAIL) * weights).pow(2).sum()
        expected = dict(zip(leaves, torch.autograd.grad(reference, list(leaves.values()))))
        assert all(torch.allclose(ours[name], expected[name], atol=1e-12) for name in params)


def test_quate_second_order_gradients_are_the_written_out_scores():
    torch.manual_seed(3)
    model = QuatE(num_nodes=6, num_relations=3, hidden_channels=2).double()
    params = dict(model.named_parameters())
    vectors = {name: torch.randn_like(p) for name, p in params.items()}

    def hessian_vector(score):
        loss = score().pow(2).sum()
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
        return torch.autograd.grad(sum((g * vectors[n]).sum() for g, n in zip(grads, params)), list(params.values()))

    ours = hessian_vector(lambda: model(HEAD, REL, TAIL))
    expected = hessian_vector(lambda: written_out_quate(params, HEAD, REL, TAIL))
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(ours, expected))
    names = list(params)
    assert torch.autograd.gradgradcheck(
        lambda *ps: torch.func.functional_call(model, dict(zip(names, ps)), (HEAD, REL, TAIL)),
        tuple(p.detach().requires_grad_() for p in params.values()),
        fast_mode=True,
    )


def copies(model):
    return [copy.deepcopy(model), pickle.loads(pickle.dumps(model))]


def test_quate_copies_and_pickles_before_and_after_a_forward():
    torch.manual_seed(4)
    model = QuatE(num_nodes=6, num_relations=3, hidden_channels=2).double()
    for copied in copies(model):
        assert torch.equal(copied(HEAD, REL, TAIL), model(HEAD, REL, TAIL))
    model(HEAD, REL, TAIL).sum().backward()
    for copied in copies(model):
        assert torch.equal(copied(HEAD, REL, TAIL), model(HEAD, REL, TAIL))


def wgekge(kg, seed=0, **kwargs):
    torch.manual_seed(seed)
    return WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1, dropout=0.0, **kwargs).double().eval()


def fresh_scores(kg, state, data=None, dtype=torch.float64, **kwargs):
    """The scores of a new model holding ``state``, on ``data`` (default: kg)."""
    fresh = wgekge(kg, seed=99, **kwargs).to(dtype)
    fresh.load_state_dict(state)
    fresh.data = data if data is not None else kg
    with torch.no_grad():
        return fresh(HEAD, REL, TAIL)


def test_wgekge_scores_with_the_parameters_in_use(kg):
    """functional_call, param.data = ..., load_state_dict, in-place edits and .to() each score as a
    new model holding the same state (the encoding cached in evaluation returned the first call's
    scores under functional_call, and scores 3e-3 off after param.data = ...)."""
    model = wgekge(kg)
    with torch.no_grad():
        first = model(HEAD, REL, TAIL)
        for seed in (1, 2):
            params = other_parameters(model, seed)
            scores = torch.func.functional_call(model, params, (HEAD, REL, TAIL))
            state = {**model.state_dict(), **params}
            assert torch.allclose(scores, fresh_scores(kg, state), atol=1e-12)
            assert not torch.allclose(scores, first, atol=1e-6)
        assert torch.equal(model(HEAD, REL, TAIL), first)  # the model's own parameters again
        # vector_to_parameters assigns param.data
        new = other_parameters(model, 3)
        torch.nn.utils.vector_to_parameters(
            torch.cat([new[n].flatten() for n, _ in model.named_parameters()]), model.parameters()
        )
        assert torch.allclose(model(HEAD, REL, TAIL), fresh_scores(kg, model.state_dict()), atol=1e-12)
        model.load_state_dict({**model.state_dict(), **other_parameters(model, 4)})
        assert torch.allclose(model(HEAD, REL, TAIL), fresh_scores(kg, model.state_dict()), atol=1e-12)
        model.wge.entity_embedding.weight.mul_(1.5)  # in place
        model.wge.decoders[1].batch_norm.running_mean.add_(0.25)  # a buffer in place
        assert torch.allclose(model(HEAD, REL, TAIL), fresh_scores(kg, model.state_dict()), atol=1e-12)
        model.float()
        assert model(HEAD, REL, TAIL).dtype == torch.float32
        assert torch.allclose(model(HEAD, REL, TAIL), fresh_scores(kg, model.state_dict(), dtype=torch.float32))


def test_wgekge_keeps_the_adjacencies_only_while_the_graph_is_unchanged(kg):
    model = wgekge(kg, alpha0=0.0)  # scores from the encoder
    first = model._graph_inputs()
    assert model._graph_inputs() is first  # kept: built once per graph, not every call
    data = copy.copy(kg)
    model.data = data
    assert model._graph_inputs() is not first
    kept = model._graph_inputs()
    # a view tensor edited in place (another entity-focused edge): built again, and scored on the edit
    with torch.no_grad():
        before = model(HEAD, REL, TAIL)
        data.ef_edge_index = data.ef_edge_index.clone()
        assert model._graph_inputs() is not kept
        kept = model._graph_inputs()
        data.ef_edge_index[:, :2] = torch.tensor([[0, 4], [4, 0]])
        assert model._graph_inputs() is not kept
        edited = model(HEAD, REL, TAIL)
        assert torch.allclose(edited, fresh_scores(kg, model.state_dict(), data=data, alpha0=0.0), atol=1e-12)
        assert not torch.allclose(edited, before, atol=1e-9)


def test_wgekge_copies_and_pickles_before_and_after_a_forward(kg):
    model = wgekge(kg)
    for copied in copies(model):  # before any forward
        with torch.no_grad():
            assert torch.equal(copied(HEAD, REL, TAIL), model(HEAD, REL, TAIL))
    model.train()
    model.loss(HEAD, REL, TAIL).backward()  # after a forward and a backward (deepcopy crashed here)
    model.eval()
    with torch.no_grad():
        expected = model(HEAD, REL, TAIL)
    for copied in copies(model):
        assert copied._graph is None  # rebuilt from the copy's own data
        with torch.no_grad():
            assert torch.equal(copied(HEAD, REL, TAIL), expected)
        copied.data.ef_edge_index[:, :2] = torch.tensor([[0, 4], [4, 0]])  # the copy's graph is its own
    with torch.no_grad():
        assert torch.equal(model(HEAD, REL, TAIL), expected)


class LossOf(torch.nn.Module):
    """A model's ``loss`` as a module's forward, for torch.func.functional_call."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *triples):
        return self.model.loss(*triples)


@pytest.mark.parametrize("num_layers", [0, 1])
def test_wgekge_under_torch_func_grad_equals_autograd(kg, num_layers):
    """torch.func.grad of the scores and of the loss (which takes the plain-autograd 1-N loss
    there), against plain autograd on the same model; the graph is first built inside the transform.
    In evaluation mode: in training, batch norm updates its running statistics in place, which
    torch.func refuses for any module whose buffers are not the transform's inputs."""
    torch.manual_seed(5)
    model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=num_layers).double().eval()
    for module, fn in ((model, lambda out: out.pow(2).sum()), (LossOf(model), lambda out: out)):
        params = {name: p.detach().clone() for name, p in module.named_parameters()}
        model._graph = None  # built inside torch.func.grad
        ours = torch.func.grad(lambda p: fn(torch.func.functional_call(module, p, (HEAD, REL, TAIL))))(params)
        module.zero_grad()
        fn(module(HEAD, REL, TAIL)).backward()
        for name, p in module.named_parameters():
            expected = p.grad if p.grad is not None else torch.zeros_like(p)
            assert torch.allclose(ours[name], expected, atol=1e-12), name


# ------------------------------------------- KGEModel's contract: constructor, embeddings, signatures, ties


def kge_model(cls, kg, **kwargs):
    torch.manual_seed(0)
    if cls is QuatE:
        return QuatE(25, 3, hidden_channels=2, **kwargs)
    return WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1, **kwargs)


@pytest.mark.parametrize("cls", [QuatE, WGEKGE])
def test_kge_models_run_kgemodels_constructor_and_use_its_embeddings(cls, kg, monkeypatch):
    calls = []
    kgemodel_init = KGEModel.__init__

    def spy(self, *args, **kwargs):
        calls.append((args, kwargs))
        kgemodel_init(self, *args, **kwargs)

    monkeypatch.setattr(KGEModel, "__init__", spy)
    model = kge_model(cls, kg)
    assert calls == [((25, 3, 8, False), {})]  # 4 * hidden_channels real numbers per embedding
    assert (model.num_nodes, model.num_relations, model.hidden_channels) == (25, 3, 2)  # quaternions
    assert model.node_emb.weight.shape == (25, 8)
    assert model.rel_emb.weight.shape == ((3 if cls is QuatE else 6), 8)  # WGE: the inverses at r + R
    # each parameter once, by one name; the state dict holds exactly those and the persistent buffers
    named = dict(model.named_parameters())
    assert len({id(p) for p in model.parameters()}) == len(list(model.parameters())) == len(named)
    assert list(named)[:2] == ["node_emb.weight", "rel_emb.weight"]
    buffers = [name for name, _ in model.named_buffers() if name.rsplit(".", 1)[-1] != "layer_weights"]
    assert sorted(model.state_dict()) == sorted([*named, *buffers])
    assert all(isinstance(value, torch.Tensor) for value in model.state_dict().values())  # no graph in it
    if cls is WGEKGE:  # the weights WGE encodes are KGEModel's embeddings' (no second copy)
        assert model.node_emb.weight is model.wge.entity_embedding.weight
        assert model.rel_emb.weight is model.wge.relation_embedding.weight
    # no unused parameter: the loss reaches every one
    model.train()
    model.loss(HEAD, REL, TAIL).backward()
    assert [name for name, p in named.items() if p.grad is None or not p.grad.abs().sum() > 0] == []


@pytest.mark.parametrize("cls", [QuatE, WGEKGE])
@pytest.mark.parametrize("method", ["__init__", "forward", "loss", "loader", "test"])
def test_kge_models_have_pygs_signatures(cls, method):
    """PyG's parameters in PyG's order (names, kinds, defaults); any further one keyword-only. The
    constructors: PyG's first three, and sparse=False (after WGEKGE's data and loss_fn)."""

    def described(parameters):
        return [(p.name, p.kind, p.default) for p in parameters]

    ours = list(inspect.signature(getattr(cls, method)).parameters.values())
    pyg = list(inspect.signature(getattr(KGEModel, method)).parameters.values())
    if method == "__init__":
        assert described(ours[:4]) == described(pyg[:4])  # self, num_nodes, num_relations, hidden_channels
        assert [p.default for p in ours if p.name == "sparse"] == [False]
        return
    assert described(ours[: len(pyg)]) == described(pyg)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in ours[len(pyg) :])


def test_wgekge_refuses_sparse_gradients(kg):
    with pytest.raises(ValueError, match="sparse=False only: .* gradients are dense"):
        WGEKGE(25, 3, hidden_channels=2, data=kg, sparse=True)


def test_wgekge_refuses_cached_layers(kg):
    # cached layers would keep the first graph's normalisation whatever its data holds later
    with pytest.raises(ValueError, match="takes cached=False only: it encodes the graph its data holds now"):
        WGEKGE(25, 3, hidden_channels=2, data=kg, cached=True)


def test_wgekge_state_dict_holds_each_weight_once_and_loads_either_name(kg):
    model = wgekge(kg, seed=1)
    state = model.state_dict()
    with torch.no_grad():
        expected = model(HEAD, REL, TAIL)
    wge_names = {"node_emb.weight": "wge.entity_embedding.weight", "rel_emb.weight": "wge.relation_embedding.weight"}
    assert not set(wge_names.values()) & set(state)
    older = {wge_names.get(name, name): value for name, value in state.items()}  # saved before the weights were tied
    both = {**state, "wge.entity_embedding.weight": torch.zeros_like(state["node_emb.weight"])}  # KGEModel's wins
    for given, assign in ((state, False), (older, False), (both, False), (state, True)):
        fresh = wgekge(kg, seed=2)
        assert not torch.equal(fresh.node_emb.weight, state["node_emb.weight"])
        fresh.load_state_dict(given, assign=assign)
        assert fresh.node_emb.weight is fresh.wge.entity_embedding.weight  # still tied (assign=True too)
        assert fresh.rel_emb.weight is fresh.wge.relation_embedding.weight
        assert len(list(fresh.parameters())) == len(list(model.parameters()))
        with torch.no_grad():
            assert torch.equal(fresh(HEAD, REL, TAIL), expected)
    # the WGE inside loads a WGE's (the trainer's) state dict, and functional_call takes either name
    torch.manual_seed(3)
    wge = WGE(25, 3, hidden_channels=2, num_layers=1, dropout=0.0).double()
    model.wge.load_state_dict(wge.state_dict())
    assert torch.equal(model.node_emb.weight, wge.entity_embedding.weight)
    weight = torch.randn_like(model.node_emb.weight)
    with torch.no_grad():
        by_kge_name = torch.func.functional_call(model, {"node_emb.weight": weight}, (HEAD, REL, TAIL))
        by_wge_name = torch.func.functional_call(model, {"wge.entity_embedding.weight": weight}, (HEAD, REL, TAIL))
    assert torch.equal(by_kge_name, by_wge_name) and torch.equal(model.node_emb.weight, wge.entity_embedding.weight)


def tied_model(cls, kg):
    """A model whose entities of even id embed as zeros: every query scores those 13 exactly 0, so
    that a true tail among them ties with the other 12 (a head among them scores all 25 as 0: the
    query of a zero head is zero, through a fresh model's batch norm too)."""
    torch.manual_seed(0)
    if cls is QuatE:
        model = QuatE(25, 3, hidden_channels=2)
    else:  # alpha0=1: scores from the layer-0 embeddings, the encoder's layer computed and weighed 0
        model = WGEKGE(25, 3, hidden_channels=2, data=kg, num_layers=1, alpha0=1.0)
    model = model.double().eval()
    with torch.no_grad():
        model.node_emb.weight[::2] = 0.0
    return model


@pytest.mark.parametrize("cls", [QuatE, WGEKGE])
def test_test_ranks_ties_at_their_mean_position_where_pyg_takes_its_sort_order(cls, kg):
    """Both numbers on deliberate ties, each against a loop over the candidates' scores: PyG's
    KGEModel.test takes a tail's position in argsort(descending=True), anywhere among the entities it
    ties with; ours takes the mean of those positions."""
    model = tied_model(cls, kg)
    head = torch.tensor([1, 3, 5, 7, 9, 0, 11, 13])
    rel = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    tail = torch.tensor([2, 4, 6, 8, 1, 10, 15, 20])  # even ids tie with 12 others, odd ids with none
    k = 8
    better, tied, sort_position = [], [], []
    with torch.no_grad():
        for h, r, t in zip(head.tolist(), rel.tolist(), tail.tolist()):
            scores = model(torch.full((25,), h), torch.full((25,), r), torch.arange(25)).tolist()  # candidate n
            better.append(sum(scores[n] > scores[t] for n in range(25)))
            tied.append(sum(scores[n] == scores[t] for n in range(25) if n != t))
            position = torch.tensor(scores, dtype=torch.float64).argsort(descending=True).tolist().index(t)
            assert better[-1] <= position <= better[-1] + tied[-1]  # any place among the tied entities
            sort_position.append(position)
    # head 0 (a zero query) scores every entity 0: all 25 tie
    assert tied == [24 if h == 0 else 12 if t % 2 == 0 else 0 for h, t in zip(head.tolist(), tail.tolist())]
    pyg = KGEModel.test(model, head, rel, tail, batch_size=7, k=k, log=False)
    ours = model.test(head, rel, tail, batch_size=7, k=k, log=False)
    # PyG's: the sort positions (from 0)
    assert pyg[0] == pytest.approx(sum(sort_position) / 8)
    assert pyg[1] == pytest.approx(sum(1 / (p + 1) for p in sort_position) / 8)
    assert pyg[2] == sum(p < k for p in sort_position) / 8
    # ours: the tie-averaged positions b + m / 2 (from 0)
    mean_position = [b + m / 2 for b, m in zip(better, tied)]
    assert ours[0] == pytest.approx(sum(mean_position) / 8)
    assert ours[1] == pytest.approx(sum(1 / (p + 1) for p in mean_position) / 8)
    assert ours[2] == sum(p < k for p in mean_position) / 8
    # equal where no tail ties, not here
    assert sort_position != mean_position and ours != pyg, (ours, pyg)
    untied = tail % 2 == 1
    assert model.test(head[untied], rel[untied], tail[untied], 7, k, False) == pytest.approx(
        KGEModel.test(model, head[untied], rel[untied], tail[untied], 7, k, False)
    )
