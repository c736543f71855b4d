import pytest
import torch

from torch_wge.nn import QuatEDecoder
from torch_wge.nn.decoders import quate_query


def paper_score(h, r, t):
    """(h ⊗ r/|r|) • t written out per quaternion in float64."""
    n = h.size(-1) // 4
    score = torch.zeros(h.shape[:-1], dtype=torch.float64)
    for m in range(n):
        a, b, c, d = (h[..., k * n + m] for k in range(4))
        p, q, u, v = (r[..., k * n + m] for k in range(4))
        norm = torch.sqrt(p * p + q * q + u * u + v * v)
        p, q, u, v = p / norm, q / norm, u / norm, v / norm
        prod = (
            a * p - b * q - c * u - d * v,
            a * q + b * p + c * v - d * u,
            a * u - b * v + c * p + d * q,
            a * v + b * u - c * q + d * p,
        )
        score += sum(prod[k] * t[..., k * n + m] for k in range(4))
    return score


def test_plain_quate_equals_paper_formula():
    decoder = QuatEDecoder(12, batch_norm=False, dropout=0.0).double()
    h, r, t = torch.randn(3, 10, 12, dtype=torch.float64)
    assert torch.allclose(decoder.score(h, r, t), paper_score(h, r, t), atol=1e-10)
    assert torch.allclose(quate_query(h, r), decoder(h, r))


def test_score_all_matches_score():
    decoder = QuatEDecoder(8, batch_norm=False).double()
    h, r = torch.randn(2, 5, 8, dtype=torch.float64)
    x = torch.randn(7, 8, dtype=torch.float64)
    scores = decoder.score_all(h, r, x)
    assert scores.shape == (5, 7)
    for i in range(5):
        for j in range(7):
            assert torch.allclose(scores[i, j], decoder.score(h[i : i + 1], r[i : i + 1], x[j : j + 1])[0])


def test_invariant_to_scaling_each_relation_quaternion():
    decoder = QuatEDecoder(16, batch_norm=False).double()
    h, r, t = torch.randn(3, 4, 16, dtype=torch.float64)
    scale = torch.rand(4, 4, dtype=torch.float64) * 5 + 0.1  # one factor per quaternion
    scaled = r * scale.repeat(1, 4)
    assert torch.allclose(decoder.score(h, scaled, t), decoder.score(h, r, t), atol=1e-10)


def test_forward_hooks_see_every_query_scored():
    decoder = QuatEDecoder(8, batch_norm=False).double()
    h, r, t = torch.randn(3, 5, 8, dtype=torch.float64)
    seen = []
    decoder.register_forward_hook(lambda module, inputs, out: seen.append(out))
    decoder.score(h, r, t), decoder.score_all(h, r, t)
    assert len(seen) == 2 and all(torch.allclose(q, quate_query(h, r)) for q in seen)


def test_batch_norm_and_dropout_on_query():
    torch.manual_seed(0)
    decoder = QuatEDecoder(8, dropout=0.5, batch_norm=True).double()
    h, r, t = torch.randn(3, 64, 8, dtype=torch.float64)
    decoder.eval()  # running statistics start at mean 0, var 1: BN is x / sqrt(1 + eps)
    plain = QuatEDecoder(8, batch_norm=False).double()
    assert torch.allclose(decoder.score(h, r, t), plain.score(h, r, t) / (1 + 1e-5) ** 0.5, atol=1e-10)
    no_dropout = QuatEDecoder(8, dropout=0.0).double().train()
    normalised = no_dropout(h, r)  # batch statistics: each channel has mean 0, variance 1
    assert torch.allclose(normalised.mean(0), torch.zeros(8, dtype=torch.float64), atol=1e-8)
    assert torch.allclose(normalised.var(0, unbiased=False), torch.ones(8, dtype=torch.float64), atol=1e-3)
    decoder.train()
    q = decoder(h, r)
    kept = q != 0
    assert 0.35 < (~kept).double().mean() < 0.65  # dropout zeroes about half the entries
    assert torch.allclose(q[kept], 2 * normalised[kept], atol=1e-8)  # the rest scaled by 1 / (1 - p)


def test_rejects_bad_sizes():
    with pytest.raises(ValueError, match="multiple of 4"):
        QuatEDecoder(10)
    with pytest.raises(ValueError, match="dropout"):
        QuatEDecoder(8, dropout=1.5)
    assert repr(QuatEDecoder(8, dropout=0.5)) == "QuatEDecoder(8, dropout=0.5, batch_norm=True)"


def test_query_of_relations_normalised_beforehand():
    decoder = QuatEDecoder(8, batch_norm=False).double()
    h, r, t = torch.randn(3, 5, 8, dtype=torch.float64)
    unit = r / r.unflatten(-1, (4, 2)).norm(dim=-2).repeat(1, 4)  # each quaternion's modulus, per component
    assert torch.allclose((decoder(h, unit, normalized=True) * t).sum(-1), paper_score(h, r, t), atol=1e-10)
    # with the flag r is taken as it is: a non-unit r gives another query
    assert not torch.allclose(decoder(h, r, normalized=True), decoder(h, r), atol=1e-3)


def test_dropout_keeps_each_element_with_probability_one_minus_p_and_scales_it():
    from torch_wge.nn.decoders.quate_decoder import dropout

    torch.manual_seed(0)
    x = torch.randn(400, 500, dtype=torch.float64)
    for p in (0.2, 0.5, 0.8):
        out = dropout(x, p)
        kept = out != 0
        assert abs(kept.double().mean().item() - (1 - p)) < 0.005  # 200,000 draws: 4 standard deviations
        assert torch.allclose(out[kept], x[kept] / (1 - p), atol=1e-12)
        assert torch.allclose(dropout(x, p).mean(), x.mean(), atol=0.02)  # unbiased in expectation
    assert dropout(x, 0.5, training=False) is x and dropout(x, 0.0) is x


def paper_query(h, r):
    """h ⊗ r/|r| written out on the four components of each quaternion (as paper_score), in float64."""
    a, b, c, d = h.chunk(4, dim=-1)
    p, q, u, v = r.chunk(4, dim=-1)
    norm = torch.sqrt(p * p + q * q + u * u + v * v)
    p, q, u, v = p / norm, q / norm, u / norm, v / norm
    return torch.cat(
        [
            a * p - b * q - c * u - d * v,
            a * q + b * p + c * v - d * u,
            a * u - b * v + c * p + d * q,
            a * v + b * u - c * q + d * p,
        ],
        dim=-1,
    )


def paper_batch_norm_score(decoder, h, r, t):
    """BN(h ⊗ r/|r|) • t with the batch norm written out (batch statistics in training)."""
    q, norm = paper_query(h, r), decoder.batch_norm
    if decoder.training:
        mean, var = q.mean(0), q.var(0, unbiased=False)
    else:
        mean, var = norm.running_mean, norm.running_var
    q = (q - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
    return (q * t).sum(-1)


@pytest.mark.parametrize("training", [True, False])
def test_second_order_gradients_equal_the_written_out_formula(training):
    torch.manual_seed(8)
    decoder = QuatEDecoder(8, dropout=0.0).double().train(training)
    decoder.batch_norm.running_mean.uniform_(-1, 1)
    decoder.batch_norm.weight.data.uniform_(0.5, 1.5)
    h, r, t = (torch.randn(5, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.allclose(decoder.score(h, r, t), paper_batch_norm_score(decoder, h, r, t), atol=1e-10)
    inputs = (h, r, t, decoder.batch_norm.weight)
    vectors = [torch.randn_like(x) for x in inputs]

    def hessian_vector(score):
        grads = torch.autograd.grad(score().pow(2).sum(), inputs, create_graph=True)
        return torch.autograd.grad(sum((g * v).sum() for g, v in zip(grads, vectors)), inputs)

    ours = hessian_vector(lambda: decoder.score(h, r, t))
    expected = hessian_vector(lambda: paper_batch_norm_score(decoder, h, r, t))
    assert all(torch.allclose(a, b, atol=1e-9) for a, b in zip(ours, expected))
    assert torch.autograd.gradgradcheck(lambda a, b: decoder(a, b), (h[:3], r[:3]), fast_mode=True)


def compiled_matches_eager(backend):
    torch._dynamo.reset()
    torch.manual_seed(9)
    decoder = QuatEDecoder(8, dropout=0.0).double()
    decoder.batch_norm.running_mean.uniform_(-1, 1)
    compiled = torch.compile(decoder, fullgraph=True, backend=backend)  # fullgraph: a graph break raises
    h, r, x = (torch.randn(n, 8, dtype=torch.float64, requires_grad=True) for n in (5, 5, 7))
    for training in (True, False):
        for normalized in (False, True):
            decoder.train(training)
            ours = compiled(h, r, normalized)
            expected = decoder(h, r, normalized)
            assert torch.allclose(ours, expected, atol=1e-12)
            grads = torch.autograd.grad((ours @ x.t()).pow(2).sum(), (h, r, x, decoder.batch_norm.weight))
            expected_grads = torch.autograd.grad((expected @ x.t()).pow(2).sum(), (h, r, x, decoder.batch_norm.weight))
            assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(grads, expected_grads))


def test_compile_fullgraph_matches_eager():
    """torch.compile traces the decoder whole (the Hamilton product as plain operations there)."""
    compiled_matches_eager("aot_eager")


@pytest.mark.slow  # inductor's code generation: about 15-30 s on a 2-core CPU
def test_compile_fullgraph_with_inductor_matches_eager():
    compiled_matches_eager("inductor")
