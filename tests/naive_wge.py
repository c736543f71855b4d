"""A deliberately naive WGE: the test suite's independent reference for the whole model
(``tests/test_naive_reference.py``) and the naive baseline of ``benchmarks/bench_speed.py``.

The model math is exactly that of :class:`torch_wge.nn.WGE` (two-view
quaternion encoder, QuatE decoder per layer with batch norm and dropout on the
query, 1-N BCE with label smoothing summed over layers with weights alpha_k),
written the straightforward way one would write it first:

- each view's normalised adjacency D^-1/2 (A + I) D^-1/2 is a DENSE ``[n, n]``
  matrix and message passing is a dense matmul;
- the quaternion weight matrix is assembled with ``torch.cat`` from the
  paper's 4x4 block form;
- the loss is ``F.binary_cross_entropy(sigmoid(logits), targets)`` per layer
  with a DENSE ``[B, N]`` target matrix filled row by row, and autograd;
- training queries and their answers live in a Python dict;
- evaluation ranks ONE query at a time (Python loop over the queries),
  filtering the other known answers with Python sets.

The parameter names match :class:`torch_wge.nn.WGE`, so a torch_wge state dict
loads into :class:`NaiveWGE`; ``python tests/naive_wge.py --check``
verifies on a small random KG that both give the same scores, loss and
filtered ranks.
"""

import argparse
import random
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def hamilton(q: Tensor, p: Tensor) -> Tensor:
    """Element-wise Hamilton product of quaternion vectors in [r | i | j | k] block layout."""
    a, b, c, d = q.chunk(4, dim=-1)
    e, f, g, h = p.chunk(4, dim=-1)
    return torch.cat(
        [
            a * e - b * f - c * g - d * h,
            b * e + a * f - d * g + c * h,
            c * e + d * f + a * g - b * h,
            d * e - c * f + b * g + a * h,
        ],
        dim=-1,
    )


def unit_quaternions(r: Tensor) -> Tensor:
    """Each quaternion of ``r`` divided by its norm."""
    a, b, c, d = r.chunk(4, dim=-1)
    norm = torch.sqrt(a * a + b * b + c * c + d * d).clamp_min(1e-12)
    return torch.cat([a / norm, b / norm, c / norm, d / norm], dim=-1)


def dense_normalized_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """D^-1/2 (A + I) D^-1/2 as a dense matrix (row: target, column: source)."""
    adj = torch.zeros(num_nodes, num_nodes)
    adj[edge_index[1], edge_index[0]] = 1.0
    adj.fill_diagonal_(1.0)
    deg_inv_sqrt = adj.sum(dim=1).pow(-0.5)
    return deg_inv_sqrt.view(-1, 1) * adj * deg_inv_sqrt.view(1, -1)


class NaiveQuaternionWeight(torch.nn.Module):
    """The quaternion weight W = W_r + W_i i + W_j j + W_k k and its real matrix M(W)."""

    def __init__(self, channels: int):
        super().__init__()
        n = channels // 4
        bound = (6.0 / (2 * channels)) ** 0.5
        self.weight = torch.nn.Parameter(torch.empty(4, n, n).uniform_(-bound, bound))

    def matrix(self) -> Tensor:
        wr, wi, wj, wk = self.weight
        return torch.cat(
            [
                torch.cat([wr, wi, wj, wk], dim=1),
                torch.cat([-wi, wr, wk, -wj], dim=1),
                torch.cat([-wj, -wk, wr, wi], dim=1),
                torch.cat([-wk, wj, -wi, wr], dim=1),
            ],
            dim=0,
        )


class _Decoder(torch.nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.batch_norm = torch.nn.BatchNorm1d(channels)


class _Layer(torch.nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.entity_lin, self.entity_bias = NaiveQuaternionWeight(channels), torch.nn.Parameter(torch.zeros(channels))
        self.entity_norm = torch.nn.BatchNorm1d(channels)
        self.relation_lin = NaiveQuaternionWeight(channels)
        self.relation_bias = torch.nn.Parameter(torch.zeros(channels))
        self.relation_norm = torch.nn.BatchNorm1d(channels)

    @staticmethod
    def view(lin, bias: Tensor, norm: torch.nn.BatchNorm1d, h: Tensor, adj: Tensor) -> Tensor:
        """tanh(BN(A_norm @ (h @ M(W)) + b)) of one view, with the dense normalised adjacency A_norm."""
        return torch.tanh(norm(adj @ (h @ lin.matrix()) + bias))


class _Encoder(torch.nn.Module):
    def __init__(self, channels: int, num_layers: int):
        super().__init__()
        self.convs = torch.nn.ModuleList(_Layer(channels) for _ in range(num_layers))


class NaiveWGE(torch.nn.Module):
    """WGE with dense adjacencies, dense targets and autograd BCE (see the module docstring)."""

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        ef_edge_index: Tensor,
        rf_edge_index: Tensor,
        channels: int = 256,
        num_layers: int = 2,
        alpha0: float = 0.9,
        dropout: float = 0.5,
        label_smoothing: float = 0.1,
    ):
        super().__init__()
        self.num_entities = num_entities
        self.num_layers = num_layers
        self.dropout = dropout
        self.label_smoothing = label_smoothing
        self.alphas = [1.0] if num_layers == 0 else [alpha0] + [(1 - alpha0) / num_layers] * num_layers
        self.entity_embedding = torch.nn.Embedding(num_entities, channels)
        self.relation_embedding = torch.nn.Embedding(2 * num_relations, channels)
        torch.nn.init.xavier_normal_(self.entity_embedding.weight)
        torch.nn.init.xavier_normal_(self.relation_embedding.weight)
        self.encoder = _Encoder(channels, num_layers)
        self.decoders = torch.nn.ModuleList(_Decoder(channels) for _ in range(num_layers + 1))
        if num_layers > 0:
            self.register_buffer("ef_adj", dense_normalized_adjacency(ef_edge_index, num_entities), persistent=False)
            self.register_buffer(
                "rf_adj", dense_normalized_adjacency(rf_edge_index, num_entities + 2 * num_relations), persistent=False
            )

    def encode(self) -> List[Tuple[Tensor, Tensor]]:
        x, rel = self.entity_embedding.weight, self.relation_embedding.weight
        states = [(x, rel)]
        for layer in self.encoder.convs:
            xr = layer.view(
                layer.relation_lin, layer.relation_bias, layer.relation_norm, torch.cat([x, rel], dim=0), self.rf_adj
            )
            xe = layer.view(layer.entity_lin, layer.entity_bias, layer.entity_norm, x, self.ef_adj)
            x, rel = xe * xr[: self.num_entities], xr[self.num_entities :]
            states.append((x, rel))
        return states

    def layer_logits(self, states, heads: Tensor, relations: Tensor) -> List[Tensor]:
        out = []
        for decoder, (x, rel) in zip(self.decoders, states):
            q = hamilton(x[heads], unit_quaternions(rel[relations]))
            q = F.dropout(decoder.batch_norm(q), self.dropout, self.training)
            out.append(q @ x.t())
        return out

    def loss(self, states, heads: Tensor, relations: Tensor, targets: Tensor) -> Tensor:
        smoothed = (1.0 - self.label_smoothing) * targets + 1.0 / self.num_entities
        return sum(
            alpha * F.binary_cross_entropy(torch.sigmoid(logits), smoothed)
            for alpha, logits in zip(self.alphas, self.layer_logits(states, heads, relations))
        )

    def score(self, states, heads: Tensor, relations: Tensor) -> Tensor:
        return sum(alpha * logits for alpha, logits in zip(self.alphas, self.layer_logits(states, heads, relations)))


def answer_sets(triples: Sequence[Sequence[int]], num_relations: int) -> Dict[Tuple[int, int], Set[int]]:
    """{(entity, relation): answers}, inverse relations (r + R) included."""
    answers: Dict[Tuple[int, int], Set[int]] = {}
    for h, r, t in triples:
        answers.setdefault((h, r), set()).add(t)
        answers.setdefault((t, r + num_relations), set()).add(h)
    return answers


def train_epoch(
    model: NaiveWGE,
    optimizer,
    answers: Dict[Tuple[int, int], Set[int]],
    batch_size: int = 1024,
    grad_clip: float = 0.5,
    seed: int = 0,
    max_batches: Optional[int] = None,
) -> Tuple[float, int]:
    """One pass over the (head, relation) queries (or ``max_batches`` of them); returns (mean loss, batches)."""
    model.train()
    queries = list(answers)
    random.Random(seed).shuffle(queries)
    total, batches = 0.0, 0
    for start in range(0, len(queries), batch_size):
        if max_batches is not None and batches >= max_batches:
            break
        batch = queries[start : start + batch_size]
        heads = torch.tensor([h for h, _ in batch])
        relations = torch.tensor([r for _, r in batch])
        targets = torch.zeros(len(batch), model.num_entities)
        for row, key in enumerate(batch):
            targets[row, list(answers[key])] = 1.0
        states = model.encode()
        loss = model.loss(states, heads, relations, targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        total += loss.item()
        batches += 1
    return total / max(batches, 1), batches


@torch.no_grad()
def evaluate(
    model: NaiveWGE,
    triples: Sequence[Sequence[int]],
    known: Dict[Tuple[int, int], Set[int]],
    num_relations: int,
    max_triples: Optional[int] = None,
    states=None,
) -> List[float]:
    """Filtered realistic ranks, one query at a time: the tail queries of
    ``triples[:max_triples]`` followed by their head queries. The encoder
    runs first unless its output ``states`` (of :meth:`NaiveWGE.encode` in
    eval mode) is given."""
    model.eval()
    if states is None:
        states = model.encode()
    triples = list(triples)[:max_triples]
    queries = [(h, r, t) for h, r, t in triples] + [(t, r + num_relations, h) for h, r, t in triples]
    ranks = []
    for entity, relation, target in queries:
        scores = model.score(states, torch.tensor([entity]), torch.tensor([relation]))[0]
        others = known.get((entity, relation), set()) - {target}
        if others:
            scores[list(others)] = float("-inf")
        true_score = scores[target]
        better = int((scores > true_score).sum())
        not_worse = int((scores >= true_score).sum())
        ranks.append((better + 1 + not_worse) / 2)
    return ranks


def _check() -> None:
    """Same scores, loss and filtered ranks as torch_wge on a small random KG."""
    from torch_wge.evaluation import LinkPredictionEvaluator
    from torch_wge.nn import WGE, OneToNLoss
    from torch_wge.testing import random_kg
    from torch_wge.training import TrainConfig, TrainingQueries, graph_transform, split_triples

    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)  # dense adjacencies built in float64 too
    data = graph_transform(TrainConfig())(random_kg(40, 5, 300, seed=1))
    num_entities, num_relations = int(data.num_nodes), int(data.num_relations)
    ref = WGE(num_entities, num_relations, hidden_channels=4, num_layers=2, dropout=0.0).double()
    naive = NaiveWGE(
        num_entities, num_relations, data.ef_edge_index, data.rf_edge_index, channels=16, num_layers=2, dropout=0.0
    ).double()
    naive.load_state_dict(ref.state_dict())
    train = split_triples(data, "train")
    queries = TrainingQueries(train, num_entities, num_relations)
    heads, relations, positives = queries.batch(torch.arange(len(queries)))
    targets = torch.zeros(heads.numel(), num_entities, dtype=torch.double)
    targets[positives[0], positives[1]] = 1.0
    inputs = ref.graph_inputs(data)
    ref.train(), naive.train()
    ref_loss = OneToNLoss()(ref, ref.encode(**inputs), heads, relations, positives)
    naive_loss = naive.loss(naive.encode(), heads, relations, targets)
    print(f"training loss: torch_wge {ref_loss.item():.10f}  naive {naive_loss.item():.10f}")
    assert torch.allclose(ref_loss, naive_loss, rtol=1e-9), "losses differ"
    ref_loss.backward(), naive_loss.backward()
    ref_grads, naive_grads = dict(ref.named_parameters()), dict(naive.named_parameters())
    worst = max(float((p.grad - naive_grads[name].grad).abs().max()) for name, p in ref_grads.items())
    print(f"max |gradient difference| over {len(ref_grads)} parameters {worst:.2e}")
    assert worst < 1e-9, "gradients differ"
    ref.eval(), naive.eval()
    with torch.no_grad():
        encoded, states = ref.encode(**inputs), naive.encode()
        ref_scores = ref.score_all(encoded, heads, relations)
        naive_scores = naive.score(states, heads, relations)
    print(f"max |score difference| {float((ref_scores - naive_scores).abs().max()):.2e}")
    assert torch.allclose(ref_scores, naive_scores, atol=1e-9), "scores differ"
    test = split_triples(data, "test")
    evaluator = LinkPredictionEvaluator(test, split_triples(data, "all"), num_entities, num_relations)
    ref_ranks = evaluator.compute_ranks(lambda e, r: ref.score_all(encoded, e, r))
    naive_ranks = evaluate(
        naive, test.tolist(), answer_sets(split_triples(data, "all").tolist(), num_relations), num_relations
    )
    assert ref_ranks.tolist() == naive_ranks, "filtered ranks differ"
    print(f"{len(naive_ranks)} filtered ranks identical; naive WGE matches torch_wge")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare scores, loss and ranks with torch_wge on a small random KG"
    )
    args = parser.parse_args()
    if args.check:
        tic = time.perf_counter()
        _check()
        print(f"check done in {time.perf_counter() - tic:.1f} s")
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
