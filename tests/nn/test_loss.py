"""The fused 1-N objectives against dense float64 autograd references."""

import pytest
import torch
import torch.nn.functional as F

from torch_wge.nn.decoders import loss as loss_module
from torch_wge.nn.decoders.loss import one_to_n_loss
from torch_wge.utils import autograd as autograd_module

WEIGHTS = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
# unsorted rows, a query with several answers, a repeated pair, a query with none (row 2)
POSITIVES = torch.tensor([[3, 0, 0, 1, 3, 4, 4], [0, 1, 5, 2, 4, 3, 3]])


def reference_bce(queries, entities, positives, weights, eps):
    num_entities = entities.size(1)
    targets = torch.zeros(queries.size(1), num_entities, dtype=torch.float64)
    targets.index_put_(
        (positives[0], positives[1]), torch.ones(positives.size(1), dtype=torch.float64), accumulate=True
    )
    targets = (1 - eps) * targets + 1.0 / num_entities
    return sum(
        w * F.binary_cross_entropy_with_logits(queries[k] @ entities[k].t(), targets) for k, w in enumerate(weights)
    )


def reference_softmax(queries, entities, positives, weights, eps):
    total = 0.0
    for k, w in enumerate(weights):
        log_probs = torch.log_softmax(queries[k] @ entities[k].t(), dim=-1)
        per_pair = [-(1 - eps) * log_probs[b, t] - eps * log_probs[b].mean() for b, t in positives.t().tolist()]
        total = total + w * sum(per_pair) / len(per_pair)
    return total


def reference_kl(queries, entities, positives, weights, eps):
    """Per query with answers: cross-entropy against (1 - eps) * (answer counts / a_b) + eps / N."""
    num_entities = entities.size(1)
    counts = torch.zeros(queries.size(1), num_entities, dtype=torch.float64)
    counts.index_put_((positives[0], positives[1]), torch.ones(positives.size(1), dtype=torch.float64), accumulate=True)
    answered = counts.sum(1) > 0
    targets = (1 - eps) * counts[answered] / counts[answered].sum(1, keepdim=True) + eps / num_entities
    return sum(
        w * -(targets * torch.log_softmax(queries[k][answered] @ entities[k].t(), dim=-1)).sum(1).mean()
        for k, w in enumerate(weights)
    )


def reference_filtered_softmax(queries, entities, positives, weights, eps):
    """Per pair (b, t): cross-entropy over t and the entities that answer no pair of b, plus the smoothing term."""
    total = 0.0
    for k, w in enumerate(weights):
        logits = queries[k] @ entities[k].t()
        per_pair = []
        for b, t in positives.t().tolist():
            answers = set(positives[1, positives[0] == b].tolist())
            candidates = [t] + [n for n in range(logits.size(1)) if n not in answers]
            log_prob = logits[b, t] - torch.logsumexp(logits[b, candidates], dim=0)
            per_pair.append(-log_prob + eps * logits[b, t] - eps * logits[b].mean())
        total = total + w * sum(per_pair) / len(per_pair)
    return total


OBJECTIVE_REFERENCES = [
    ("bce", reference_bce),
    ("softmax", reference_softmax),
    ("kl", reference_kl),
    ("filtered-softmax", reference_filtered_softmax),
]


# one chunk; chunks of 2 rows; of 1 row; of 3 rows and 2 (the row floor above 6 // 6 entities)
@pytest.mark.parametrize("chunk_elements, min_rows", [(1 << 19, 128), (12, 1), (6, 1), (6, 3)])
@pytest.mark.parametrize("objective, reference", OBJECTIVE_REFERENCES)
@pytest.mark.parametrize("fused", [True, False])
def test_loss_and_gradients_equal_dense_reference(monkeypatch, chunk_elements, min_rows, objective, reference, fused):
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", chunk_elements)
    monkeypatch.setattr(loss_module, "MIN_CHUNK_ROWS", min_rows)
    torch.manual_seed(0)
    queries = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    entities = torch.randn(3, 6, 8, dtype=torch.float64, requires_grad=True)
    loss = one_to_n_loss(queries, entities, POSITIVES, WEIGHTS, objective, 0.2, fused=fused)
    grads = torch.autograd.grad(3.0 * loss, (queries, entities))

    expected = reference(queries, entities, POSITIVES, WEIGHTS, 0.2)
    expected_grads = torch.autograd.grad(3.0 * expected, (queries, entities))
    assert torch.allclose(loss, expected, atol=1e-12)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-12)


CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("objective, reference", OBJECTIVE_REFERENCES)
@pytest.mark.parametrize("fused", [True, False])
def test_bfloat16_matmuls_stay_close_to_the_float64_reference(monkeypatch, objective, reference, fused, device):
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", 12)  # several chunks per layer
    monkeypatch.setattr(loss_module, "GPU_CHUNK_ELEMENTS", 12)
    monkeypatch.setattr(loss_module, "MIN_CHUNK_ROWS", 1)
    torch.manual_seed(2)
    queries = torch.randn(3, 5, 64, dtype=torch.float64) / 4
    entities = torch.randn(3, 6, 64, dtype=torch.float64) / 4
    q32, x32 = (t.to(device, torch.float32).requires_grad_() for t in (queries, entities))
    positives, weights = POSITIVES.to(device), WEIGHTS.to(device, torch.float32)
    loss = one_to_n_loss(q32, x32, positives, weights, objective, 0.2, torch.bfloat16, fused)
    grads = [grad.cpu() for grad in torch.autograd.grad(loss, (q32, x32))]
    assert loss.dtype == torch.float32 and all(g.dtype == torch.float32 for g in grads)
    assert loss.device.type == device

    queries.requires_grad_(), entities.requires_grad_()
    expected = reference(queries, entities, POSITIVES, WEIGHTS, 0.2)
    expected_grads = torch.autograd.grad(expected, (queries, entities))
    # bfloat16 keeps 8 significant bits: each operand and logit is within 2^-9 relative of the exact one
    assert abs(loss.item() - expected.item()) < 1e-2 * abs(expected.item())
    for grad, expected_grad in zip(grads, expected_grads):
        error = (grad.double() - expected_grad).norm() / expected_grad.norm()
        assert error < 2e-2
    # and float32 matmuls are far closer still: the bfloat16 rounding is what the tolerance is for
    exact = one_to_n_loss(q32, x32, positives, weights, objective, 0.2, fused=fused)
    assert abs(exact.item() - expected.item()) < 1e-5 * abs(expected.item())
    assert abs(loss.item() - expected.item()) > abs(exact.item() - expected.item())


@pytest.mark.parametrize("objective", ["bce", "softmax", "kl", "filtered-softmax"])
@pytest.mark.parametrize("fused", [True, False])
def test_gradcheck(objective, fused):
    torch.manual_seed(1)
    queries = torch.randn(2, 4, 4, dtype=torch.float64, requires_grad=True)
    entities = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    positives = POSITIVES[:, :4].clamp(max=3)
    weights = WEIGHTS[:2]
    assert torch.autograd.gradcheck(
        lambda q, x: one_to_n_loss(q, x, positives, weights, objective, 0.1, fused=fused), (queries, entities)
    )


def hessian_vector_products(loss_fn, queries, entities, vectors):
    """(d/dq, d/dx) of the gradient's inner product with ``vectors``: one Hessian-vector product."""
    grads = torch.autograd.grad(loss_fn(queries, entities), (queries, entities), create_graph=True)
    return torch.autograd.grad(sum((g * v).sum() for g, v in zip(grads, vectors)), (queries, entities))


@pytest.mark.parametrize("objective, reference", OBJECTIVE_REFERENCES)
def test_unfused_loss_second_order_equals_the_dense_reference(objective, reference):
    """fused=False differentiates twice: its Hessian-vector products are the float64 reference's
    (the fused loss's were 0.12-0.78 off relative), and gradgradcheck passes."""
    torch.manual_seed(7)
    queries = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    entities = torch.randn(3, 6, 8, dtype=torch.float64, requires_grad=True)
    vectors = (torch.randn_like(queries), torch.randn_like(entities))
    ours = hessian_vector_products(
        lambda q, x: one_to_n_loss(q, x, POSITIVES, WEIGHTS, objective, 0.2, fused=False), queries, entities, vectors
    )
    expected = hessian_vector_products(
        lambda q, x: reference(q, x, POSITIVES, WEIGHTS, 0.2), queries, entities, vectors
    )
    for got, want in zip(ours, expected):
        assert torch.allclose(got, want, atol=1e-10)
    small_q, small_x = queries[:2, :4, :4].detach().requires_grad_(), entities[:2, :, :4].detach().requires_grad_()
    positives = POSITIVES[:, :4].clamp(max=3)
    assert torch.autograd.gradgradcheck(
        lambda q, x: one_to_n_loss(q, x, positives, WEIGHTS[:2], objective, 0.1, fused=False), (small_q, small_x)
    )


def test_unfused_filtered_softmax_second_order_stays_finite():
    """A query every entity answers and logits 300 apart: no infinite logarithm reaches a second derivative."""
    queries = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]], dtype=torch.float64, requires_grad=True)
    entities = torch.tensor(
        [[[300.0, 0.0], [-300.0, 0.0], [0.0, 0.0], [0.0, 1.0]]], dtype=torch.float64, requires_grad=True
    )
    positives = torch.tensor([[0, 0, 1, 1, 1, 1], [0, 1, 0, 1, 2, 3]])  # query 1: every entity answers
    weights = torch.ones(1, dtype=torch.float64)
    vectors = (torch.randn_like(queries), torch.randn_like(entities))
    ours = hessian_vector_products(
        lambda q, x: one_to_n_loss(q, x, positives, weights, "filtered-softmax", 0.1, fused=False),
        queries,
        entities,
        vectors,
    )
    expected = hessian_vector_products(
        lambda q, x: reference_filtered_softmax(q, x, positives, weights, 0.1), queries, entities, vectors
    )
    assert all(torch.isfinite(g).all() for g in ours)
    assert all(torch.allclose(g, e, atol=1e-8) for g, e in zip(ours, expected))


@pytest.mark.parametrize("objective", ["bce", "filtered-softmax"])
def test_fused_loss_refuses_a_double_backward_naming_the_alternative(objective):
    from torch_wge.nn import WGE, OneToNLoss

    queries = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    entities = torch.randn(3, 6, 8, dtype=torch.float64, requires_grad=True)
    loss = one_to_n_loss(queries, entities, POSITIVES, WEIGHTS, objective, 0.2)
    with pytest.raises(RuntimeError, match=r"^the fused 1-N loss .* OneToNLoss\(fused=False\)") as error:
        torch.autograd.grad(loss, (queries, entities), create_graph=True)
    assert "\n" not in str(error.value)
    # and through the module, on a model's parameters
    model = WGE(6, 2, hidden_channels=2, num_layers=0, dropout=0.0).double()
    heads, relations = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 3])
    positives = torch.tensor([[0, 1, 2], [3, 4, 5]])
    loss = OneToNLoss(objective)(model, model.encode(), heads, relations, positives)
    with pytest.raises(RuntimeError, match="fused=False"):
        torch.autograd.grad(loss, list(model.parameters()), create_graph=True)
    unfused = OneToNLoss(objective, fused=False)
    assert "fused=False" in repr(unfused) and "fused" not in repr(OneToNLoss(objective))
    grads = torch.autograd.grad(
        unfused(model, model.encode(), heads, relations, positives), list(model.parameters()), create_graph=True
    )
    assert all(g.requires_grad for g in grads)


@pytest.mark.parametrize("objective, reference", OBJECTIVE_REFERENCES)
def test_torch_func_grad_of_the_loss_equals_the_reference(objective, reference):
    """Inside torch.func.grad the loss is computed with plain autograd, fused or not."""
    torch.manual_seed(8)
    queries, entities = torch.randn(3, 5, 8, dtype=torch.float64), torch.randn(3, 6, 8, dtype=torch.float64)
    expected = torch.func.grad(lambda q, x: reference(q, x, POSITIVES, WEIGHTS, 0.2), argnums=(0, 1))(queries, entities)
    for fused in (True, False):
        ours = torch.func.grad(
            lambda q, x: one_to_n_loss(q, x, POSITIVES, WEIGHTS, objective, 0.2, fused=fused), argnums=(0, 1)
        )(queries, entities)
        assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(ours, expected))


@pytest.mark.parametrize("fused", [True, False])
def test_softmax_without_smoothing_is_cross_entropy_per_triple(fused):
    torch.manual_seed(2)
    queries, entities = torch.randn(1, 3, 4, dtype=torch.float64), torch.randn(1, 7, 4, dtype=torch.float64)
    positives = torch.tensor([[0, 0, 2], [1, 6, 3]])
    loss = one_to_n_loss(queries, entities, positives, torch.ones(1, dtype=torch.float64), "softmax", 0.0, fused=fused)
    logits = queries[0] @ entities[0].t()
    expected = F.cross_entropy(logits[positives[0]], positives[1])
    assert torch.allclose(loss, expected, atol=1e-12)


@pytest.mark.parametrize("fused", [True, False])
def test_kl_weighs_each_query_once_and_softmax_each_answer(fused):
    """Two queries, one with three answers: softmax is the mean over the four
    pairs, kl the mean over the two queries of the mean over their answers."""
    torch.manual_seed(3)
    queries, entities = torch.randn(1, 2, 4, dtype=torch.float64), torch.randn(1, 5, 4, dtype=torch.float64)
    positives = torch.tensor([[0, 0, 0, 1], [1, 2, 4, 0]])
    weights = torch.ones(1, dtype=torch.float64)
    nll = -torch.log_softmax(queries[0] @ entities[0].t(), dim=-1)
    many, one = nll[0, [1, 2, 4]], nll[1, 0]
    softmax = one_to_n_loss(queries, entities, positives, weights, "softmax", 0.0, fused=fused)
    kl = one_to_n_loss(queries, entities, positives, weights, "kl", 0.0, fused=fused)
    assert torch.allclose(softmax, (many.sum() + one) / 4, atol=1e-12)
    assert torch.allclose(kl, (many.mean() + one) / 2, atol=1e-12)
    assert not torch.allclose(softmax, kl, atol=1e-3)


@pytest.mark.parametrize("fused", [True, False])
def test_filtered_softmax_leaves_a_query_s_other_answers_out(fused):
    """A query with three answers and one with one: each of the first's pairs
    is the cross-entropy over its tail and the two non-answers; the second's
    is the plain softmax's."""
    torch.manual_seed(4)
    queries, entities = torch.randn(1, 2, 4, dtype=torch.float64), torch.randn(1, 5, 4, dtype=torch.float64)
    positives = torch.tensor([[0, 0, 0, 1], [1, 2, 4, 0]])
    logits = queries[0] @ entities[0].t()
    many = [torch.logsumexp(logits[0, [t, 0, 3]], dim=0) - logits[0, t] for t in (1, 2, 4)]
    one = torch.logsumexp(logits[1], dim=0) - logits[1, 0]
    loss = one_to_n_loss(
        queries, entities, positives, torch.ones(1, dtype=torch.float64), "filtered-softmax", 0.0, fused=fused
    )
    assert torch.allclose(loss, (sum(many) + one) / 4, atol=1e-12)


@pytest.mark.parametrize("fused", [True, False])
def test_filtered_softmax_with_one_answer_per_query_is_softmax(fused):
    torch.manual_seed(5)
    queries = torch.randn(2, 3, 4, dtype=torch.float64)
    entities = torch.randn(2, 7, 4, dtype=torch.float64)
    positives = torch.tensor([[2, 0, 1], [6, 1, 1]])
    weights = WEIGHTS[:2]
    softmax = one_to_n_loss(queries, entities, positives, weights, "softmax", 0.1, fused=fused)
    filtered = one_to_n_loss(queries, entities, positives, weights, "filtered-softmax", 0.1, fused=fused)
    assert torch.allclose(softmax, filtered, atol=1e-12)


@pytest.mark.parametrize("fused", [True, False])
def test_filtered_softmax_stays_finite_far_apart_logits(fused):
    """An answer 300 above the rest and one 300 below: exp of either against the other overflows float32."""
    queries = torch.tensor([[[1.0, 0.0]]], requires_grad=True)
    entities = torch.tensor([[[300.0, 0.0], [-300.0, 0.0], [0.0, 0.0], [0.0, 1.0]]], requires_grad=True)
    positives = torch.tensor([[0, 0], [0, 1]])
    loss = one_to_n_loss(queries, entities, positives, torch.ones(1), "filtered-softmax", 0.0, fused=fused)
    loss.backward()
    # pair (0, 0): log(e^300 + 2) - 300 ~ 0; pair (0, 1): log(e^-300 + 2) + 300 ~ 300 + log 2
    assert torch.allclose(loss, torch.tensor((300.0 + torch.log(torch.tensor(2.0)).item()) / 2))
    assert torch.isfinite(queries.grad).all() and torch.isfinite(entities.grad).all()


@pytest.mark.parametrize("fused", [True, False])
def test_filtered_softmax_of_a_query_every_entity_answers_is_zero(fused):
    """With no non-answers left, each pair's softmax is over its own tail alone: loss and gradient 0."""
    torch.manual_seed(6)
    queries = torch.randn(1, 2, 4, dtype=torch.float64, requires_grad=True)
    entities = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    positives = torch.tensor([[0, 0, 0, 1], [0, 1, 2, 1]])
    weights = torch.ones(1, dtype=torch.float64)
    loss = one_to_n_loss(queries, entities, positives, weights, "filtered-softmax", 0.0, fused=fused)
    expected = reference_filtered_softmax(queries, entities, positives, weights, 0.0)
    assert torch.allclose(loss, expected, atol=1e-12)
    grads = torch.autograd.grad(loss, (queries, entities))
    expected_grads = torch.autograd.grad(expected, (queries, entities))
    assert all(torch.allclose(g, e, atol=1e-12) for g, e in zip(grads, expected_grads))
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)


def test_no_gradient_work_under_no_grad(monkeypatch):
    # the two gradient matmuls of each chunk are skipped when no input needs a gradient
    calls = []
    monkeypatch.setattr(autograd_module, "_add_matmul", lambda *args: calls.append(args))
    torch.manual_seed(5)
    queries = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    entities = torch.randn(3, 6, 4, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        loss = one_to_n_loss(queries, entities, POSITIVES, WEIGHTS, "bce", 0.1)
    assert calls == [] and not loss.requires_grad
    assert torch.allclose(loss, one_to_n_loss(queries.detach(), entities.detach(), POSITIVES, WEIGHTS, "bce", 0.1))
    one_to_n_loss(queries, entities, POSITIVES, WEIGHTS, "bce", 0.1)
    assert len(calls) == 3  # one per layer and chunk


def test_unknown_objective():
    with pytest.raises(ValueError, match="objective must be one of"):
        one_to_n_loss(
            torch.zeros(1, 1, 4), torch.zeros(1, 2, 4), torch.zeros(2, 0, dtype=torch.long), torch.ones(1), "margin"
        )


# ------------------------------------------------------------ sampled softmax


def sampled_wge_and_batch(num_candidates):
    import torch_geometric.transforms as T

    from torch_wge.nn import WGE, OneToNLoss
    from torch_wge.testing import random_kg
    from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

    data = T.Compose([EntityFocusedTransform(), RelationFocusedTransform()])(random_kg(40, 3, 160, seed=3))
    torch.manual_seed(0)
    model = WGE(40, 3, hidden_channels=2, num_layers=1, dropout=0.0).double().train()
    loss_fn = OneToNLoss(objective="softmax", candidates=num_candidates)
    heads, relations = torch.tensor([0, 5, 9, 11, 30]), torch.tensor([0, 4, 2, 1, 5])
    positives = torch.tensor([[0, 0, 1, 2, 3, 4, 4], [3, 7, 7, 12, 1, 39, 20]])
    return model, loss_fn, model.graph_inputs(data), heads, relations, positives


def sampled_softmax_reference(model, loss_fn, inputs, heads, relations, positives, candidates):
    """The sampled softmax loss over ``candidates``, every logit in float64, for autograd."""
    encoded = model.encode(**inputs)
    queries = model.queries(encoded, heads, relations)
    eps, reference = loss_fn.label_smoothing, 0.0
    for k, weight in enumerate(model.layer_weights.tolist()):
        logits = queries[k] @ encoded.entities[k][candidates].t()  # [B, |C|]
        rows, tails = positives[0], torch.searchsorted(candidates, positives[1])
        per_pair = (
            torch.logsumexp(logits[rows], dim=1)
            - (1 - eps) * logits[rows, tails]
            - eps / len(candidates) * logits[rows].sum(dim=1)
        )
        reference = reference + weight * per_pair.mean()
    return reference


def test_sampled_softmax_matches_dense_float64_reference():
    model, loss_fn, inputs, heads, relations, positives = sampled_wge_and_batch(num_candidates=6)
    torch.manual_seed(42)
    loss = loss_fn(model, model.encode(**inputs), heads, relations, positives)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    # the reference: the same draw, every logit over the candidates in float64, autograd
    torch.manual_seed(42)
    candidates = torch.unique(torch.cat([positives[1], torch.randperm(40)[:6]]))
    assert 6 <= len(candidates) < 40
    reference = sampled_softmax_reference(model, loss_fn, inputs, heads, relations, positives, candidates)
    reference.backward()
    assert torch.allclose(loss, reference, atol=1e-12)
    for grad, p in zip(grads, model.parameters()):
        assert torch.allclose(grad, p.grad, atol=1e-12)


def test_sampled_softmax_takes_candidates_drawn_beforehand():
    # the trainer draws a GPU batch's candidates on the CPU and hands them over with the batch
    model, loss_fn, inputs, heads, relations, positives = sampled_wge_and_batch(num_candidates=6)
    candidates = torch.unique(torch.cat([positives[1], torch.tensor([0, 2, 5, 33, 2])]))
    positions = torch.searchsorted(candidates, positives[1])
    loss = loss_fn(model, model.encode(**inputs), heads, relations, positives, (candidates, positions))
    reference = sampled_softmax_reference(model, loss_fn, inputs, heads, relations, positives, candidates)
    assert torch.allclose(loss, reference, atol=1e-12)


def test_sampled_softmax_with_every_entity_drawn_is_the_exact_objective():
    from torch_wge.nn import OneToNLoss

    model, loss_fn, inputs, heads, relations, positives = sampled_wge_and_batch(num_candidates=40)
    sampled = loss_fn(model, model.encode(**inputs), heads, relations, positives)
    exact = OneToNLoss(objective="softmax")(model, model.encode(**inputs), heads, relations, positives)
    assert torch.allclose(sampled, exact, atol=1e-12)


def test_sampled_softmax_needs_the_softmax_objective():
    from torch_wge.nn import OneToNLoss

    with pytest.raises(ValueError, match="candidates needs objective='softmax'"):
        OneToNLoss(candidates=5)
