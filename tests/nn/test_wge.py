import copy

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.transforms as T

from torch_wge.nn import WGE, OneToNLoss, QuatEDecoder
from torch_wge.testing import random_kg
from torch_wge.transforms import EntityFocusedTransform, LeviGraphTransform, RelationFocusedTransform
from torch_wge.utils.quaternion import hamilton_product, normalize_quaternion


@pytest.fixture(scope="module")
def data():
    kg = random_kg(30, 3, 200, seed=0)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5), LeviGraphTransform()])(kg)


def make(data, **kwargs):
    torch.manual_seed(0)
    model = WGE(data.num_nodes, data.num_relations, hidden_channels=2, **kwargs).double()
    return model


@pytest.mark.parametrize("views", ["two-view", "entity", "relation", "levi"])
def test_score_all_is_weighted_sum_of_layer_scores(data, views):
    model = make(data, num_layers=2, alpha0=0.6, views=views).eval()
    encoded = model.encode(**model.graph_inputs(data))
    heads, relations = torch.tensor([0, 3, 7]), torch.tensor([0, 4, 5])
    per_layer = model.layer_scores(encoded, heads, relations)
    assert per_layer.shape == (3, 3, 30)
    expected = 0.6 * per_layer[0] + 0.2 * per_layer[1] + 0.2 * per_layer[2]
    assert torch.allclose(model.score_all(encoded, heads, relations), expected, atol=1e-10)
    # each layer is its decoder applied to that layer's representations
    for k in range(3):
        x, rel = encoded.entities[k], encoded.relations[k]
        assert torch.allclose(per_layer[k], model.decoders[k].score_all(x[heads], rel[relations], x), atol=1e-10)


def test_sparse_and_edge_index_inputs_agree(data):
    model = make(data, num_layers=2).eval()
    heads, relations = torch.arange(5), torch.arange(5)
    dense = model(heads, relations, **model.graph_inputs(data, sparse=False))
    model2 = make(data, num_layers=2).eval()  # fresh conv caches
    sparse = model2(heads, relations, **model2.graph_inputs(data, sparse=True))
    assert torch.allclose(dense, sparse, atol=1e-10)


def test_zero_layers_is_quate(data):
    model = make(data, num_layers=0, dropout=0.0, batch_norm=False)
    assert model.encoder is None and len(model.decoders) == 1
    heads, relations = torch.tensor([1, 2]), torch.tensor([0, 5])
    quate = QuatEDecoder(8, batch_norm=False).double()
    x, rel = model.entity_embedding.weight, model.relation_embedding.weight
    expected = quate.score_all(x[heads], rel[relations], x)
    assert torch.allclose(model(heads, relations), expected)


def test_loss_equals_dense_bce_with_label_smoothing(data):
    model = make(data, num_layers=2, alpha0=0.9, dropout=0.0).train()
    encoded = model.encode(**model.graph_inputs(data))
    heads, relations = torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 2, 3])
    positives = torch.tensor([[0, 0, 2, 3], [4, 9, 1, 0]])
    loss = OneToNLoss()(model, encoded, heads, relations, positives)

    encoded = model.encode(**model.graph_inputs(data))  # same batch statistics: same batch
    logits = model.layer_scores(encoded, heads, relations)
    targets = torch.zeros(4, 30, dtype=torch.float64)
    targets[positives[0], positives[1]] = 1.0
    targets = 0.9 * targets + 1.0 / 30
    expected = sum(
        w * F.binary_cross_entropy(torch.sigmoid(logits[k]), targets) for k, w in enumerate([0.9, 0.05, 0.05])
    )
    assert torch.allclose(loss, expected, atol=1e-10)


def test_gradients_reach_every_parameter(data):
    model = make(data, num_layers=2)
    encoded = model.encode(**model.graph_inputs(data))
    OneToNLoss()(model, encoded, torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([[0, 1], [2, 3]])).backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


def test_bad_arguments(data):
    with pytest.raises(ValueError, match="hidden_channels must be a positive int"):
        WGE(10, 2, hidden_channels=0)
    with pytest.raises(ValueError, match="views"):
        WGE(10, 2, hidden_channels=2, views="three-view")
    with pytest.raises(TypeError):  # the width is a keyword: a positional 256 meant reals before
        WGE(10, 2, 256)
    model = WGE(data.num_nodes, data.num_relations, hidden_channels=2, views="levi")
    data = data.clone()  # the fixture is shared by the module's tests
    del data.levi_entity_relation_index
    with pytest.raises(ValueError, match="levi_edge_index"):
        model.graph_inputs(data)


@pytest.mark.parametrize("counts", [(0, 2), (10, 0), (-1, 2), (10.0, 2)])
def test_an_empty_graph_is_refused(counts):
    with pytest.raises(ValueError, match="must be a positive int"):
        WGE(*counts, hidden_channels=2)


@pytest.mark.parametrize("view", ["ef_edge_index", "rf_edge_index"])
@pytest.mark.parametrize("bad_id", [-1, "past the node count"])
def test_graph_inputs_refuse_view_ids_outside_the_node_count(data, view, bad_id):
    # before anything indexes with them: a CSR adjacency built from such ids writes out of bounds
    model = make(data)
    data = data.clone()
    stored = {"ef_edge_index": "ef_edge_index", "rf_edge_index": "rf_entity_relation_index"}[view]
    data[stored] = data[stored].clone()
    data[stored][0, 0] = int(data.num_nodes) + 1000 if bad_id != -1 else -1  # an entity id
    with pytest.raises(ValueError, match=f"{view} holds node id"):
        model.graph_inputs(data)
    data[stored] = data[stored].double()
    with pytest.raises(ValueError, match=f"{view} must be an integer tensor"):
        model.graph_inputs(data, sparse=False)


def test_a_built_view_attribute_is_not_set_silently(data):
    with pytest.raises(AttributeError, match="built from the view's stored pairs"):
        data["rf_edge_index"] = data.rf_edge_index
    with pytest.raises(AttributeError, match="built from the view's stored pairs"):
        data.levi_num_nodes = 5


def test_n3_term_is_the_sum_of_cubed_quaternion_moduli(data):
    torch.manual_seed(0)
    plain = make(data, num_layers=1, dropout=0.0).double()
    heads, relations = torch.tensor([0, 1, 2]), torch.tensor([0, 3, 1])
    positives = torch.tensor([[0, 0, 2], [4, 9, 1]])
    encoded = plain.encode(**plain.graph_inputs(data))
    difference = OneToNLoss(n3=0.25)(plain, encoded, heads, relations, positives) - OneToNLoss()(
        plain, encoded, heads, relations, positives
    )

    def cubed_moduli(vector):  # quaternion q has parts vector[q], vector[n + q], vector[2n + q], vector[3n + q]
        n = vector.numel() // 4
        return sum(float(sum(vector[part * n + q] ** 2 for part in range(4))) ** 1.5 for q in range(n))

    x, rel = plain.entity_embedding.weight.detach(), plain.relation_embedding.weight.detach()
    expected = (
        sum(
            cubed_moduli(x[heads[b]]) + cubed_moduli(rel[relations[b]]) + cubed_moduli(x[t])
            for b, t in positives.t().tolist()
        )
        / 3
    )
    assert abs(difference.item() - 0.25 * expected) < 1e-9


def test_relation_prediction_loss_is_softmax_over_all_relations_of_the_quate_score(data):
    model = make(data, num_layers=1)
    encoded = model.encode(**model.graph_inputs(data))
    heads, relations = torch.tensor([0, 1, 2]), torch.tensor([0, 4, 1])
    positives = torch.tensor([[0, 1, 1, 2], [4, 9, 7, 1]])
    loss = OneToNLoss.relation_prediction_loss(model, encoded, heads, relations, positives)

    expected = 0.0
    for k, weight in enumerate([0.9, 0.1]):
        x, rel = encoded.entities[k].detach(), encoded.relations[k].detach()
        per_triple = []
        for b, t in positives.t().tolist():
            scores = torch.stack(
                [  # (h ⊗ r̂) • t for every relation, written with the product on the left
                    (hamilton_product(x[heads[b]], normalize_quaternion(rel[r])) * x[t]).sum()
                    for r in range(rel.size(0))
                ]
            )
            per_triple.append(-torch.log_softmax(scores, dim=0)[relations[b]])
        expected += weight * torch.stack(per_triple).mean()
    assert torch.allclose(loss, expected, atol=1e-10)


def test_graph_inputs_read_each_views_edges_and_node_count(data):
    levi = make(data, num_layers=1, views="levi")
    inputs = levi.graph_inputs(data, sparse=False)
    assert list(inputs) == ["rf_edge_index"] and torch.equal(inputs["rf_edge_index"], data.levi_edge_index)
    two_view = make(data, num_layers=1)
    inputs = two_view.graph_inputs(data, sparse=False)
    assert inputs["ef_edge_index"] is data.ef_edge_index and torch.equal(inputs["rf_edge_index"], data.rf_edge_index)
    # the sparse adjacency's size is the view's node count on the data: entities and relation nodes
    wider = data.clone()
    wider.num_relation_nodes = data.num_relation_nodes + 3
    adj = two_view.graph_inputs(wider)["rf_edge_index"]
    assert adj.shape == (data.rf_num_nodes + 3,) * 2
    assert adj.to_dense()[data.rf_edge_index[1], data.rf_edge_index[0]].eq(1).all()


def test_one_model_on_two_graphs_encodes_each_graph():
    """The encoder's cached adjacencies belong to their graph: a second graph, or
    the graph in another dtype, is never encoded with the first graph's."""
    views = T.Compose([EntityFocusedTransform(), RelationFocusedTransform()])
    graph_a, graph_b = (views(random_kg(30, 3, 90, seed=seed)) for seed in (11, 12))
    torch.manual_seed(0)
    model = WGE(30, 3, hidden_channels=2, num_layers=2).eval()

    def fresh_encoding(graph, dtype=torch.float32):
        fresh = copy.deepcopy(model).to(dtype)
        fresh.encoder.reset_parameters()  # new caches ...
        fresh.load_state_dict(model.state_dict())  # ... same weights
        return fresh.encode(**fresh.graph_inputs(graph)).entities[-1]

    with torch.no_grad():
        for graph in (graph_a, graph_b, graph_a):
            for sparse in (True, False):
                got = model.encode(**model.graph_inputs(graph, sparse=sparse)).entities[-1]
                assert torch.allclose(got, fresh_encoding(graph), atol=1e-6)
        assert not torch.allclose(fresh_encoding(graph_a), fresh_encoding(graph_b), atol=1e-3)
        model.double()
        got = model.encode(**model.graph_inputs(graph_b)).entities[-1]
        assert got.dtype == torch.float64 and torch.allclose(got, fresh_encoding(graph_b, torch.float64), atol=1e-12)


def test_loss_on_triples_asks_each_distinct_query_once_with_all_its_answers(data):
    from torch_wge.training import TrainingQueries

    model = make(data, num_layers=2, dropout=0.0)  # training mode: batch norm over the batch's queries
    head, rel, tail = torch.tensor([0, 0, 5, 7, 0]), torch.tensor([1, 1, 1, 2, 1]), torch.tensor([4, 9, 4, 0, 4])
    encoded = model.encode(**model.graph_inputs(data))
    loss = OneToNLoss().triples(model, encoded, head, rel, tail)
    # by hand: queries (h, r) and (t, r + 3) of the distinct triples, sorted by (head, relation)
    answers = {}
    for h, r, t in set(zip(head.tolist(), rel.tolist(), tail.tolist())):
        answers.setdefault((h, r), set()).add(t)
        answers.setdefault((t, r + 3), set()).add(h)
    queries = sorted(answers)
    assert queries[:3] == [(0, 1), (0, 5), (4, 4)] and answers[(0, 1)] == {4, 9} and answers[(4, 4)] == {0, 5}
    rows = [row for row, query in enumerate(queries) for _ in answers[query]]
    tails = [t for query in queries for t in sorted(answers[query])]
    expected = OneToNLoss()(model, encoded, *map(torch.tensor, zip(*queries)), torch.tensor([rows, tails]))
    assert torch.allclose(loss, expected, atol=1e-12)
    # the trainer's loss on the same batch: the queries of these triples, all at once
    trainer_queries = TrainingQueries(torch.stack([head, rel, tail], dim=1), data.num_nodes, data.num_relations)
    batch = trainer_queries.batch(torch.arange(len(trainer_queries)))
    assert torch.allclose(loss, OneToNLoss()(model, encoded, *batch), atol=1e-12)


def test_training_on_triples_lowers_the_loss(data):
    model = make(data, num_layers=1, dropout=0.0)
    inputs = model.graph_inputs(data)
    head, tail = data.edge_index[:, data.train_mask]
    rel = data.edge_type[data.train_mask]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(5):
        loss = OneToNLoss().triples(model, model.encode(**inputs), head, rel, tail)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses


def test_loss_on_triples_refuses_query_positives_and_relations_out_of_range():
    model = WGE(5, 2, hidden_channels=2, num_layers=0)
    encoded = model.encode()
    with pytest.raises(ValueError, match="positives go to forward"):
        OneToNLoss().triples(model, encoded, torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([[0, 1], [2, 3]]))
    with pytest.raises(ValueError, match="2 heads, 1 relations"):
        OneToNLoss().triples(model, encoded, torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([2, 3]))
    # relation ids are packed into query keys e * 2R + r: an id outside [0, R) would become another query
    for bad in (2, -1, 3):
        with pytest.raises(ValueError, match=r"outside the relations \[0, 2\)"):
            OneToNLoss().triples(model, encoded, torch.tensor([0]), torch.tensor([bad]), torch.tensor([1]))


def test_hooks_on_the_decoders_fire_whenever_the_model_scores(data):
    model = make(data, num_layers=2).eval()
    seen = []
    for k, decoder in enumerate(model.decoders):
        decoder.register_forward_hook(lambda module, inputs, out, k=k: seen.append((k, out.shape)))
    encoded = model.encode(**model.graph_inputs(data))
    heads, relations, tails = torch.tensor([0, 3]), torch.tensor([0, 4]), torch.tensor([1, 2])
    model.score_all(encoded, heads, relations)
    model.score_triples(encoded, heads, relations, tails)
    OneToNLoss()(model, encoded, heads, relations, torch.tensor([[0, 1], [1, 2]]))
    assert seen == [(k, (2, 8)) for _ in range(3) for k in range(3)]


# ------------------------------------------- second order, torch.func, parameters in use, copies


def written_out_hamilton(q, p):
    """The Hamilton product of the appendix on the four blocks of each operand (plain autograd)."""
    a1, b1, c1, d1 = q.chunk(4, dim=-1)
    a2, b2, c2, d2 = p.chunk(4, dim=-1)
    return torch.cat(
        [
            a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2,
            a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2,
            a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2,
            a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2,
        ],
        dim=-1,
    )


def dense_wge_bce(model, data, heads, relations, positives, eps=0.1):
    """WGE's 1-N BCE loss in evaluation mode from dense float64 equations: the encoder layers of
    dense_two_view (dense normalised adjacencies), each decoder's batch-normed query written out."""
    import dense_two_view

    dense_two_view_hamilton = dense_two_view.hamilton_product
    dense_two_view.hamilton_product = written_out_hamilton  # nothing of the package's product
    try:
        x, rel = model.entity_embedding.weight, model.relation_embedding.weight
        states = [(x, rel)]
        for conv in model.encoder.convs:
            states.append(dense_two_view.two_view_layer(conv, *states[-1], data.ef_edge_index, data.rf_edge_index))
    finally:
        dense_two_view.hamilton_product = dense_two_view_hamilton
    targets = torch.zeros(heads.numel(), x.size(0), dtype=torch.float64)
    targets[positives[0], positives[1]] = 1.0
    targets = (1 - eps) * targets + 1.0 / x.size(0)
    loss = 0.0
    for weight, decoder, (x, rel) in zip(model.layer_weights.tolist(), model.decoders, states):
        r = rel[relations].view(-1, 4, rel.size(1) // 4)
        unit = (r / r.pow(2).sum(1, keepdim=True).sqrt()).flatten(1)
        norm = decoder.batch_norm
        q = (written_out_hamilton(x[heads], unit) - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps)
        logits = (q * norm.weight + norm.bias) @ x.t()
        loss = loss + weight * F.binary_cross_entropy_with_logits(logits, targets)
    return loss


def randomized(data, **kwargs):
    from dense_two_view import randomize

    torch.manual_seed(1)
    model = WGE(data.num_nodes, data.num_relations, hidden_channels=2, num_layers=1, dropout=0.0, **kwargs)
    model = model.double().eval()
    for conv in model.encoder.convs:
        randomize(conv)
    for decoder in model.decoders:
        decoder.batch_norm.running_mean.normal_()
        decoder.batch_norm.running_var.uniform_(0.5, 2.0)
        decoder.batch_norm.weight.data.normal_()
    return model


BATCH = (torch.tensor([0, 3, 7, 12]), torch.tensor([0, 4, 5, 1]), torch.tensor([[0, 1, 1, 3], [5, 2, 9, 7]]))


@pytest.mark.parametrize("sparse", [False, True])
def test_second_order_gradients_through_the_unfused_loss_equal_the_dense_equations(data, sparse):
    """Hessian-vector products of WGE's loss (OneToNLoss(fused=False)) on every parameter equal
    those of the dense float64 equations, through the edge_index and the CSR (default) inputs."""
    model = randomized(data)
    inputs = model.graph_inputs(data, sparse=sparse)
    heads, relations, positives = BATCH
    params = [p for p in model.parameters()]
    vectors = [torch.randn_like(p) for p in params]

    def hessian_vector(loss):
        grads = torch.autograd.grad(loss(), params, create_graph=True)
        return torch.autograd.grad(sum((g * v).sum() for g, v in zip(grads, vectors)), params)

    loss_fn = OneToNLoss(fused=False)
    ours = hessian_vector(lambda: loss_fn(model, model.encode(**inputs), heads, relations, positives))
    expected = hessian_vector(lambda: dense_wge_bce(model, data, heads, relations, positives))
    loss = loss_fn(model, model.encode(**inputs), heads, relations, positives)
    assert torch.allclose(loss, dense_wge_bce(model, data, heads, relations, positives), atol=1e-12)
    for (name, _), got, want in zip(model.named_parameters(), ours, expected):
        assert torch.allclose(got, want, atol=1e-9), name
    # the fused loss refuses a second differentiation rather than giving another Hessian
    with pytest.raises(RuntimeError, match="fused=False"):
        torch.autograd.grad(OneToNLoss()(model, model.encode(**inputs), *BATCH), params, create_graph=True)


def other_parameters(model, seed):
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.randn(p.shape, dtype=p.dtype, generator=generator) / 2 for name, p in model.named_parameters()}


def test_functional_call_scores_with_the_parameters_given(data):
    model = randomized(data)
    inputs = model.graph_inputs(data)
    heads, relations, _ = BATCH
    with torch.no_grad():
        own = model(heads, relations, **inputs)
        for seed in (1, 2):
            params = other_parameters(model, seed)
            got = torch.func.functional_call(model, params, (heads, relations), inputs)
            fresh = randomized(data)
            fresh.load_state_dict({**model.state_dict(), **params})
            assert torch.allclose(got, fresh(heads, relations, **fresh.graph_inputs(data)), atol=1e-12)
            assert not torch.allclose(got, own, atol=1e-6)
        assert torch.equal(model(heads, relations, **inputs), own)


@pytest.mark.parametrize("num_layers", [0, 1])
def test_torch_func_grad_of_scores_and_loss_equals_autograd(data, num_layers):
    torch.manual_seed(2)
    model = WGE(data.num_nodes, data.num_relations, hidden_channels=2, num_layers=num_layers).double().eval()
    inputs = model.graph_inputs(data)
    heads, relations, positives = BATCH
    loss_fn = OneToNLoss("filtered-softmax")

    def loss(output):
        return output.pow(2).mean()

    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    for fused_loss in (False, True):

        def scalar(p):
            if not fused_loss:
                return loss(torch.func.functional_call(model, p, (heads, relations), inputs))
            with torch.nn.utils.stateless._reparametrize_module(model, p):
                return loss_fn(model, model.encode(**inputs), heads, relations, positives)

        ours = torch.func.grad(scalar)(params)
        model.zero_grad()
        if fused_loss:
            loss_fn(model, model.encode(**inputs), heads, relations, positives).backward()
        else:
            loss(model(heads, relations, **inputs)).backward()
        for name, p in model.named_parameters():
            expected = p.grad if p.grad is not None else torch.zeros_like(p)
            assert torch.allclose(ours[name], expected, atol=1e-12), name


def test_copies_and_pickles_before_and_after_a_forward(data):
    import pickle

    model = randomized(data)
    heads, relations, positives = BATCH
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert torch.equal(
            copied(heads, relations, **copied.graph_inputs(data)), model(heads, relations, **model.graph_inputs(data))
        )
    OneToNLoss()(model, model.encode(**model.graph_inputs(data)), heads, relations, positives).backward()
    expected = model(heads, relations, **model.graph_inputs(data))
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert torch.equal(copied(heads, relations, **copied.graph_inputs(data)), expected)
