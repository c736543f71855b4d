"""``benchmarks/bench_speed.py``'s floor: the loss's chunk rows are those ``one_to_n_loss`` uses,
the shape list's FLOPs are the epoch's counted by hand, and the floor is their sum of flops / rate.
Nothing is timed."""

import dataclasses
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch

import torch_wge.training
from torch_wge.nn.decoders import loss as loss_module

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench_speed():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports benchmarks/common.py
    try:
        spec = importlib.util.spec_from_file_location("bench_speed", BENCHMARKS / "bench_speed.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def loss_chunk_rows(monkeypatch, batch: int, num_entities: int) -> int:
    """The chunk rows ``one_to_n_loss`` hands the fused loss for a random problem of this size."""
    seen = []
    apply = loss_module.FusedOneToNLoss.apply

    class Spy:
        @staticmethod
        def apply(*args):
            seen.append(args[6])  # chunk_rows
            return apply(*args)

    monkeypatch.setattr(loss_module, "FusedOneToNLoss", Spy)
    queries = torch.randn(1, batch, 4, requires_grad=True)
    entities = torch.randn(1, num_entities, 4)
    positives = torch.stack([torch.arange(batch), torch.randint(num_entities, (batch,))])
    loss_module.one_to_n_loss(queries, entities, positives, torch.ones(1)).backward()
    assert len(seen) == 1
    return seen[0]


@pytest.mark.parametrize(
    "batch, num_entities",
    [
        (1024, 2034),  # CoDEx-S: CHUNK_ELEMENTS // N rows, several chunks
        (1000, 2034),  # a shorter last batch
        (1024, 100_000),  # CHUNK_ELEMENTS // N below MIN_CHUNK_ROWS: capped
        (100, 2034),  # one chunk holds the batch
        (1024, 300),  # one chunk holds the batch
    ],
)
def test_chunk_rows_are_the_loss_s(bench_speed, monkeypatch, batch, num_entities):
    assert bench_speed.chunk_rows(batch, num_entities) == loss_chunk_rows(monkeypatch, batch, num_entities)


def test_chunk_rows_cases_cover_the_rules(bench_speed):
    assert bench_speed.chunk_rows(1024, 2034) == loss_module.CHUNK_ELEMENTS // 2034 < 1024
    assert bench_speed.chunk_rows(1024, 100_000) == loss_module.MIN_CHUNK_ROWS
    assert bench_speed.chunk_rows(100, 2034) == 100


def test_epoch_flops_are_counted_by_hand(bench_speed):
    b, n, r, c, k = 1024, 2034, 42, 256, 2
    batch_sizes = [b, b, 500]
    matmuls = bench_speed.epoch_matmuls(batch_sizes, n, r, c, k, dtype="bfloat16")
    scoring = 3 * (k + 1) * 2 * sum(batch_sizes) * c * n
    encoder = len(batch_sizes) * 3 * k * (2 * n * c * c + 2 * (n + 2 * r) * c * c)
    assert sum(mm.flops for mm in matmuls) == scoring + encoder
    assert {mm.dtype for mm in matmuls} == {"bfloat16"}  # the loss's and the encoder's
    assert {mm.dtype for mm in bench_speed.epoch_matmuls(batch_sizes, n, r, c, k)} == {"float32"}
    # the loss's chunks: 257, 257, 257, 253 rows of a full batch, 257 and 243 of the last one
    forward = {mm.m: mm.count for mm in matmuls if mm.name == "score_fwd"}
    assert forward == {257: (3 * 2 + 1) * (k + 1), 253: 2 * (k + 1), 243: k + 1}
    assert all(mm.k == c and mm.n == n for mm in matmuls if mm.name == "score_fwd")
    # QuatE: the scoring alone, one layer
    quate = bench_speed.epoch_matmuls(batch_sizes, n, r, c, 0)
    assert sum(mm.flops for mm in quate) == 3 * 2 * sum(batch_sizes) * c * n


def test_eval_flops_are_counted_by_hand(bench_speed):
    q, b, n, r, c, k = 2500, 1024, 2034, 42, 256, 2
    matmuls = bench_speed.eval_matmuls(q, b, n, r, c, k)
    assert sum(mm.flops for mm in matmuls) == 2 * q * (k + 1) * c * n + k * (2 * n * c * c + 2 * (n + 2 * r) * c * c)


def test_floor_is_the_sum_of_flops_over_rates(bench_speed):
    Matmul = bench_speed.Matmul
    matmuls = [
        Matmul("score_fwd", 257, 256, 2034, 12, "bfloat16", "nt"),
        Matmul("conv_ef_fwd", 2034, 256, 256, 4, "float32", "nn"),
    ]
    rates = {matmuls[0].key: 400.0, matmuls[1].key: 100.0}
    expected = 12 * 2 * 257 * 256 * 2034 / 400e9 + 4 * 2 * 2034 * 256 * 256 / 100e9
    assert bench_speed.floor_seconds(matmuls, rates) == pytest.approx(expected, rel=1e-12)


def test_a_torch_wge_without_the_precision_setting_runs_float32_only(bench_speed, monkeypatch):
    @dataclasses.dataclass
    class OldConfig:  # as TrainConfig before its precision setting
        dataset: str = "codex-s"

    monkeypatch.setattr(torch_wge.training, "TrainConfig", OldConfig)
    args = types.SimpleNamespace(precision="auto")
    with pytest.raises(SystemExit, match="no precision setting.*--precision float32, not 'auto'"):
        bench_speed.load(args)
