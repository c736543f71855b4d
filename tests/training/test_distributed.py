"""Data-parallel training and sharded evaluation with 2 CPU processes (gloo on loopback).

The processes are started with torch.multiprocessing and find each other through the
torchrun environment variables, so the Trainer's own detection is what is tested. Each uses
one thread.
"""

import json
import os
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
import torch_geometric.transforms as T

from torch_wge.distributed import DistributedContext, SyncedBatchNorm1d
from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.evaluation.sharding import shard_bounds
from torch_wge.nn import OneToNLoss
from torch_wge.testing import random_kg
from torch_wge.training import TrainConfig, Trainer, evaluate_model, load_checkpoint, split_triples
from torch_wge.training.batch_loss import BatchLoss
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

WORLD_SIZE = 2
# The tests that compare training on one and on two processes run in float64: the processes sum
# the same terms in another order, which leaves a gradient element (a sum of a few hundred products
# of numbers of size below 1) off by at most a hundred roundoffs.
GRADIENT_ROUNDING = 100 * torch.finfo(torch.float64).eps  # 2.2e-14
ADAM_EPS = 1e-8  # torch.optim.AdamW's, which the Trainer keeps
# fork where there is one: a spawned process spends seconds importing torch again
START_METHOD = "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def make_data():
    kg = random_kg(40, 4, 400, seed=5)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(kg)


def make_config(**kwargs):
    # 280 training queries: global batches of 101, 101 and 78, split 50 / 51, 50 / 51 and 39 / 39
    defaults = dict(
        recipe="paper",  # its Adam and 1-N BCE
        dataset="random",
        epochs=1,
        hidden_channels=4,
        batch_size=101,
        lr=0.01,
        eval_every=1,
        eval_batch_size=64,
        seed=3,
        dropout=0.0,
        device="cpu",
    )
    return TrainConfig(**{**defaults, **kwargs})


# ------------------------------------------------------------ launching
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world_size, port, job):
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world_size), RANK=str(rank), LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)
    job(rank)


def run_processes(job, world_size=WORLD_SIZE, timeout=120.0):
    """Runs ``job(rank)`` in ``world_size`` fresh processes; fails (and kills them) past ``timeout``."""
    context = mp.start_processes(
        _entry, args=(world_size, _free_port(), job), nprocs=world_size, join=False, start_method=START_METHOD
    )
    deadline = time.monotonic() + timeout
    try:
        while not context.join(timeout=0.5):
            if time.monotonic() > deadline:
                raise TimeoutError(f"distributed job did not finish in {timeout} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()


# ----------------------------------------------------------------- jobs
def _train_job(rank, out, config, resume=False, die_after_epoch=None, dtype=torch.float32):
    """Trains in every process, the model in ``dtype``; rank 0 dies right after writing last.pt of
    ``die_after_epoch`` (a kill -9 of the whole job, as far as the run folder knows)."""
    torch.set_default_dtype(dtype)
    if die_after_epoch is not None and rank == 0:
        from torch_wge.training import trainer as trainer_module

        real_save = trainer_module.save_checkpoint

        def save_then_die(state, path):
            real_save(state, path)
            if str(path).endswith("last.pt") and state["epoch"] == die_after_epoch:
                os._exit(3)

        trainer_module.save_checkpoint = save_then_die
    from torch_wge.distributed import ShardedTwoViewEncoder

    trainer = Trainer(config, make_data(), out, progress=False)
    assert trainer.dist.world_size == int(os.environ["WORLD_SIZE"]) and trainer.dist.backend == "gloo"
    assert isinstance(trainer.model.encoder, ShardedTwoViewEncoder) == (config.encoder == "sharded")
    result = trainer.fit(resume=resume)
    # every rank holds the same model (also its batch-norm running averages)
    torch.save(trainer.model.state_dict(), Path(out) / f"model-rank{rank}.pt")
    Path(out, f"result-rank{rank}.json").write_text(json.dumps(result))


def _sharded_evaluation_job(rank, out, checkpoint):
    """Sharded evaluation of one checkpoint at several chunk sizes."""
    config = make_config()
    trainer = Trainer(config, make_data(), out, progress=False)
    trainer.model.load_state_dict(load_checkpoint(checkpoint)["model"])
    metrics = {}
    for split, evaluator in trainer.evaluators.items():
        for batch_size in (7, 64, 1000):  # 1000: one chunk, rank 1 ranks nothing
            results = evaluate_model(
                trainer.model, trainer.graph_inputs, evaluator, batch_size, distributed=trainer.dist
            )
            metrics[f"{split}/{batch_size}"] = results.to_flat_dict()
    Path(out, f"metrics-rank{rank}.json").write_text(json.dumps(metrics))


def _gradient_job(rank, out):
    """One global batch of 40 queries split 40 / 0: the empty part must still
    take part (batch-norm all-reduce, DDP) and the gradient must be that of
    one process on all 40 (float64, as that test)."""
    torch.set_default_dtype(torch.float64)
    data = make_data()
    config = make_config(dropout=0.0)
    context = DistributedContext.from_environment("cpu")
    from torch_wge.training import TrainingQueries, build_model

    torch.manual_seed(0)
    model = build_model(config, data)
    inputs = model.graph_inputs(data)
    context.distribute(model, "replicated")
    module = context.data_parallel(BatchLoss(model, OneToNLoss(), inputs))
    queries = TrainingQueries(split_triples(data, "train"), data.num_nodes, data.num_relations)
    index = torch.arange(40) if rank == 0 else torch.arange(0)
    loss = module(*queries.batch(index), WORLD_SIZE * index.numel() / 40)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    torch.save({"loss": context.sum(loss.item()) / WORLD_SIZE, "grads": grads}, Path(out) / f"grads-rank{rank}.pt")


# ---------------------------------------------------------------- tests
@pytest.fixture
def float64():
    """Tensors made in float64 during the test."""
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory):
    """One epoch with 1 process and with 2, same seed and global batch, dropout 0, batch norm on,
    the model in float64 (see the test of the two)."""
    root = tmp_path_factory.mktemp("one_epoch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    try:
        single = Trainer(make_config(), make_data(), root / "single", progress=False)
        assert not single.dist.enabled
        single.fit()
    finally:
        torch.set_num_threads(threads)
        torch.set_default_dtype(torch.float32)
    run_processes(partial(_train_job, out=root / "two", config=make_config(), dtype=torch.float64))
    return root


def _train_mode_scores(state, data):
    from torch_wge.training import TrainingQueries, build_model

    model = build_model(make_config(), data)
    model.load_state_dict(state)
    model.train()
    queries = TrainingQueries(split_triples(data, "train"), data.num_nodes, data.num_relations)
    with torch.no_grad():
        return model.layer_scores(model.encode(**model.graph_inputs(data)), queries.heads, queries.relations)


def test_one_epoch_on_two_processes_matches_one_process(one_epoch):
    # Both runs train in float64, where the two processes' other reduction order leaves every
    # gradient element off by at most GRADIENT_ROUNDING. One Adam step lr * m / (sqrt(v) + eps)
    # changes by at most 2 * lr / eps times that: the encoder biases feeding batch norms have an
    # exact gradient of zero, so rounding noise is all Adam sees of them, and it is divided by eps
    # alone. Three steps bound every parameter's difference.
    single = load_checkpoint(one_epoch / "single" / "last.pt")
    double = load_checkpoint(one_epoch / "two" / "last.pt")
    assert double["world_size"] == 2 and double["epoch"] == single["epoch"] == 1
    steps, lr = 3, make_config().lr
    tolerance = steps * 2 * lr / ADAM_EPS * GRADIENT_ROUNDING  # 1.3e-7
    for name, value in single["model"].items():
        other = double["model"][name]
        if value.is_floating_point():
            assert value.dtype == torch.float64
            assert (other - value).abs().max() <= tolerance, (name, (other - value).abs().max())
        else:  # num_batches_tracked
            assert torch.equal(other, value), name
    # train-mode scores (of size ~7), products of a few factors of size ~1, each moved by at most
    # the tolerance: 10 such factors bound the difference
    data = make_data()
    scores = [_train_mode_scores(state["model"], data) for state in (single, double)]
    assert (scores[1] - scores[0]).abs().max() <= 10 * tolerance * scores[0].abs().max()
    # the logged loss is that of the global batches: its terms are of size ~1 and their parameters
    # differ by at most the tolerance
    logs = [
        [json.loads(line) for line in (one_epoch / run / "log.jsonl").read_text().splitlines()]
        for run in ("single", "two")
    ]
    assert logs[1][0]["loss"] == pytest.approx(logs[0][0]["loss"], rel=10 * tolerance)
    # the other rank holds the same model as rank 0
    models = [torch.load(one_epoch / "two" / f"model-rank{r}.pt") for r in range(2)]
    for name, value in models[0].items():
        assert torch.equal(models[1][name], value), name
    # only rank 0 wrote the run folder
    assert sorted(p.name for p in (one_epoch / "two").iterdir() if not p.name.startswith(("model-", "result-"))) == [
        "best.pt",
        "config.json",
        "last.pt",
        "log.jsonl",
        "results.json",
    ]
    assert sum(1 for r in logs[1] if r["event"] == "final") == 1


def test_sharded_evaluation_gives_the_single_process_metrics(one_epoch, tmp_path):
    checkpoint = one_epoch / "two" / "best.pt"
    run_processes(partial(_sharded_evaluation_job, out=tmp_path, checkpoint=checkpoint))
    data = make_data()
    config = make_config()
    torch.manual_seed(0)
    from torch_wge.training import build_model

    model = build_model(config, data)
    model.load_state_dict(load_checkpoint(checkpoint)["model"])
    inputs = model.graph_inputs(data)
    known = split_triples(data, "all")
    metrics = [json.loads((tmp_path / f"metrics-rank{r}.json").read_text()) for r in range(2)]
    assert metrics[0] == metrics[1]  # every rank gets the full results
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for split in ("valid", "test"):
            evaluator = LinkPredictionEvaluator(split_triples(data, split), known, data.num_nodes, data.num_relations)
            for batch_size in (7, 64, 1000):
                expected = evaluate_model(model, inputs, evaluator, batch_size).to_flat_dict()
                assert metrics[0][f"{split}/{batch_size}"] == expected, (split, batch_size)
    finally:
        torch.set_num_threads(threads)
    # the final results of the two-process run are its own sharded evaluation
    result = json.loads((one_epoch / "two" / "result-rank0.json").read_text())
    assert result["test"]["metrics"]["both"]["mrr"] == metrics[0]["test/64"]["both.mrr"]


def test_killed_distributed_run_resumes_from_rank_0_checkpoint(tmp_path):
    config = make_config(epochs=3, dropout=0.5)  # per-process dropout streams are reseeded per epoch
    run_processes(partial(_train_job, out=tmp_path / "full", config=config))
    with pytest.raises(mp.ProcessExitedException):
        run_processes(partial(_train_job, out=tmp_path / "killed", config=config, die_after_epoch=2))
    assert load_checkpoint(tmp_path / "killed" / "last.pt")["epoch"] == 2
    assert not (tmp_path / "killed" / "results.json").exists()
    run_processes(partial(_train_job, out=tmp_path / "killed", config=config, resume=True))

    full, resumed = (load_checkpoint(tmp_path / run / "last.pt") for run in ("full", "killed"))
    assert resumed["epoch"] == full["epoch"] == 3
    for name, value in full["model"].items():
        assert torch.equal(resumed["model"][name], value), name
    assert resumed["best"] == full["best"]
    results = [json.loads((tmp_path / run / "result-rank0.json").read_text()) for run in ("full", "killed")]
    assert results[0]["test"] == results[1]["test"]
    epochs = [
        r["epoch"]
        for r in map(json.loads, (tmp_path / "killed" / "log.jsonl").read_text().splitlines())
        if r["event"] == "epoch"
    ]
    assert epochs == [1, 2, 3]


def test_uneven_and_empty_parts_give_the_global_batch_gradient(tmp_path, float64):
    run_processes(partial(_gradient_job, out=tmp_path))
    data = make_data()
    from torch_wge.training import TrainingQueries, build_model

    torch.manual_seed(0)
    model = build_model(make_config(), data)
    queries = TrainingQueries(split_triples(data, "train"), data.num_nodes, data.num_relations)
    loss = BatchLoss(model, OneToNLoss(), model.graph_inputs(data))(*queries.batch(torch.arange(40)))
    loss.backward()
    for rank in range(2):
        got = torch.load(tmp_path / f"grads-rank{rank}.pt")
        # the same terms summed in another order (float64)
        assert got["loss"] == pytest.approx(loss.item(), rel=GRADIENT_ROUNDING)
        for name, p in model.named_parameters():
            assert (got["grads"][name] - p.grad).abs().max() <= GRADIENT_ROUNDING, name


# ------------------------------------------------------ sharded encoder
# (views, K, conv, R): both views at K = 1, 2, 3 (real weights at K = 3), the single-view and Levi ablations, and
# one relation (2 relation nodes: 0 / 1 / 1 on 3 processes, a process without relation rows)
SHARDED_CASES = [
    ("two-view", 1, "quaternion", 4),
    ("two-view", 2, "quaternion", 4),
    ("two-view", 3, "gcn", 4),
    ("entity", 2, "quaternion", 4),
    ("relation", 2, "quaternion", 4),
    ("levi", 2, "quaternion", 4),
    ("two-view", 2, "quaternion", 1),
]
SHARDED_BATCH = 61  # queries of the one global batch: 30 / 31 on 2 processes, 20 / 20 / 21 on 3


def _sharded_case(views, num_layers, conv, num_relations):
    """The float64 model (same initialisation in every process), its graph, adjacencies and validation evaluator.
    41 entities and (R = 4) 8 relation nodes, dealt out: 20 or 21 entity rows a process on 2 processes,
    13 or 14 on 3; with R = 1, relation-node shares of 1 / 1 / 0 on 3."""
    from torch_wge.training import build_model, graph_transform

    config = make_config(views=views, num_layers=num_layers, conv=conv)
    data = graph_transform(config)(random_kg(41, num_relations, 400, seed=5))
    torch.manual_seed(0)
    model = build_model(config, data).double()
    evaluator = LinkPredictionEvaluator(
        split_triples(data, "valid"), split_triples(data, "all"), data.num_nodes, data.num_relations
    )
    return model, data, model.graph_inputs(data), evaluator


def _sharded_encoder_job(rank, out, world_size, all_to_all):
    """Each case: the loss and gradients of one global batch and the validation metrics, sharded encoder,
    its gathers' gradients summed by an all-to-all and a local sum (gloo's way) or a reduce-scatter (NCCL's)."""
    from torch_wge.distributed import sharded_encoder
    from torch_wge.training import TrainingQueries

    sharded_encoder.sums_by_all_to_all = lambda group: all_to_all

    context = DistributedContext.from_environment("cpu")
    results = []
    for case in SHARDED_CASES:
        model, data, inputs, evaluator = _sharded_case(*case)
        context.distribute(model, "sharded")
        module = context.data_parallel(BatchLoss(model, OneToNLoss(), inputs))
        queries = TrainingQueries(split_triples(data, "train"), data.num_nodes, data.num_relations)
        start, stop = shard_bounds(SHARDED_BATCH, rank, world_size)
        all_reduce, all_reduces = torch.distributed.all_reduce, []
        torch.distributed.all_reduce = lambda *args, **kwargs: all_reduces.append(1) or all_reduce(*args, **kwargs)
        loss = module(*queries.batch(torch.arange(start, stop)), world_size * (stop - start) / SHARDED_BATCH)
        forward_all_reduces = len(all_reduces)
        torch.distributed.all_reduce = all_reduce
        loss.backward()
        model.eval()
        metrics = evaluate_model(model, inputs, evaluator, 16, distributed=context).to_flat_dict()
        results.append(
            {
                "loss": context.sum(loss.item()) / world_size,
                "grads": {name: p.grad.clone() for name, p in model.named_parameters()},
                "state": list(model.state_dict()),
                "metrics": metrics,
                "forward_all_reduces": forward_all_reduces,
            }
        )
    torch.save(results, Path(out) / f"sharded-rank{rank}.pt")


@pytest.mark.parametrize("all_to_all", [True, False], ids=["all-to-all", "reduce-scatter"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_sharded_encoder_equals_one_process(tmp_path, world_size, all_to_all):
    from torch_wge.training import TrainingQueries

    job = partial(_sharded_encoder_job, out=tmp_path, world_size=world_size, all_to_all=all_to_all)
    run_processes(job, world_size=world_size)
    got = [torch.load(tmp_path / f"sharded-rank{rank}.pt") for rank in range(world_size)]
    for index, case in enumerate(SHARDED_CASES):
        model, data, inputs, evaluator = _sharded_case(*case)
        queries = TrainingQueries(split_triples(data, "train"), data.num_nodes, data.num_relations)
        loss = BatchLoss(model, OneToNLoss(), inputs)(*queries.batch(torch.arange(SHARDED_BATCH)))
        loss.backward()
        model.eval()
        metrics = evaluate_model(model, inputs, evaluator, 16).to_flat_dict()
        # float64 rounding (1e-16) amplified by the batch norms stays far below 1e-9 of the gradients' scale;
        # the encoder convs' biases feed batch norms and have a zero gradient, i.e. rounding noise of that scale
        scale = max(p.grad.abs().max().item() for p in model.parameters())
        for rank, result in enumerate(results[index] for results in got):
            assert result["loss"] == pytest.approx(loss.item(), rel=1e-12), (case, rank)
            assert result["state"] == list(model.state_dict()), case  # the sharding renames nothing
            assert result["metrics"] == metrics, (case, rank)
            # the batch norms' statistics: one all-reduce a layer (both views), one a decoder
            assert result["forward_all_reduces"] == case[1] + (case[1] + 1), (case, rank)
            for name, p in model.named_parameters():
                error = (result["grads"][name] - p.grad).abs().max().item()
                assert error <= 1e-9 * scale, (case, rank, name, error)


def test_a_sharded_run_resumes_replicated_on_another_number_of_processes(tmp_path):
    """Killed after epoch 1 of a 2-process sharded run (validating its weights' average), resumed with
    --encoder replicated on 3 processes: accepted, and epoch 2 is trained and logged once."""
    config = make_config(epochs=2, ema_decay=0.5)
    with pytest.raises(mp.ProcessExitedException):
        run_processes(partial(_train_job, out=tmp_path, config=config, die_after_epoch=1))
    killed = load_checkpoint(tmp_path / "last.pt")
    assert killed["world_size"] == 2 and killed["config"]["encoder"] == "sharded"
    replicated = make_config(epochs=2, ema_decay=0.5, encoder="replicated")
    run_processes(partial(_train_job, out=tmp_path, config=replicated, resume=True), world_size=3)
    resumed = load_checkpoint(tmp_path / "last.pt")
    assert resumed["world_size"] == 3 and resumed["epoch"] == 2 and resumed["config"]["encoder"] == "replicated"
    assert list(resumed["model"]) == list(killed["model"]) and list(resumed["ema"]) == list(killed["ema"])
    epochs = [
        r["epoch"] for r in map(json.loads, (tmp_path / "log.jsonl").read_text().splitlines()) if r["event"] == "epoch"
    ]
    assert epochs == [1, 2]


@pytest.mark.slow
def test_two_torchrun_nodes_train_sharded_as_two_processes_of_one_node(kg_folder, tmp_path):
    """Two torchrun "machines" (--nnodes 2, c10d rendezvous on 127.0.0.1, one process each) train the
    sharded encoder exactly as one torchrun of two processes does."""
    repository = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repository)}
    environment.pop("PYTEST_CURRENT_TEST", None)
    train = ["-m", "torch_wge", "train", "--dataset", str(kg_folder), "--root", str(tmp_path / "data")]
    train += ["--epochs", "2", "--hidden-channels", "2", "--dropout", "0", "--device", "cpu", "--no-progress"]
    launch = [sys.executable, "-m", "torch.distributed.run"]
    nodes = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d"]
    nodes += ["--rdzv-endpoint", f"127.0.0.1:{_free_port()}", "--rdzv-id", "sharded-nodes"]
    started = [
        subprocess.Popen(launch + nodes + train + ["--out", str(tmp_path / "nodes")], cwd=repository, env=environment)
        for _ in range(2)
    ]
    assert [process.wait(timeout=300) for process in started] == [0, 0]
    one_node = launch + ["--standalone", "--nproc_per_node", "2"] + train + ["--out", str(tmp_path / "one")]
    subprocess.run(one_node, cwd=repository, env=environment, check=True, timeout=300)
    nodes_state, one_state = (load_checkpoint(tmp_path / run / "last.pt") for run in ("nodes", "one"))
    assert nodes_state["world_size"] == one_state["world_size"] == 2 and nodes_state["config"]["encoder"] == "sharded"
    for name, value in one_state["model"].items():
        assert torch.equal(nodes_state["model"][name], value), name


# -------------------------------------------------- one-process pieces
def test_shard_bounds_cover_every_item_once():
    for size in (0, 1, 5, 64, 65):
        for world in (1, 2, 3, 4):
            parts = [shard_bounds(size, r, world) for r in range(world)]
            assert parts[0][0] == 0 and parts[-1][1] == size
            assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
            assert max(b - a for a, b in parts) - min(b - a for a, b in parts) <= 1
            for chunk in (1, 3, 64):
                parts = [shard_bounds(size, r, world, chunk=chunk) for r in range(world)]
                covered = [i for a, b in parts for i in range(a, b)]
                assert covered == list(range(size))
                assert all(a % chunk == 0 for a, b in parts if b > a)


def test_row_shares_deal_the_rows_by_weight_and_balance_counts_and_weights():
    from torch_wge.distributed import RowShares

    generator = torch.Generator().manual_seed(3)
    for count, world in ((1, 2), (7, 3), (50, 4), (3, 3), (2, 3), (64, 2)):
        weights = torch.randint(0, 6, (count,), generator=generator)
        weights[0] = 40  # a heavy first row, as the most frequent entities are
        # the deal by hand: heaviest first (ties in index order), to 0, 1, ..., P - 1, P - 1, ..., 0, 0, 1, ...
        ranked = sorted(range(count), key=lambda i: (-int(weights[i]), i))
        expected = [[] for _ in range(world)]
        for turn, row in enumerate(ranked):
            lap, seat = divmod(turn, world)
            expected[seat if lap % 2 == 0 else world - 1 - seat].append(row)
        for rank in range(world):
            shares = RowShares(count, world, rank, weights)
            assert [rows.tolist() for rows in shares.rows] == [sorted(rows) for rows in expected], (count, world)
            assert torch.equal(shares.own, shares.rows[rank]) and shares.own_count == shares.sizes[rank]
        assert max(shares.sizes) - min(shares.sizes) <= 1
        totals = [int(weights[rows].sum()) for rows in shares.rows]
        assert max(totals) - min(totals) <= int(weights.max())
    # without weights, the rows are dealt in their order
    assert [rows.tolist() for rows in RowShares(5, 2, 0).rows] == [[0, 3, 4], [1, 2]]


def test_synced_batch_norm_is_batch_norm_in_one_process():
    reference = torch.nn.BatchNorm1d(8)
    torch.nn.init.normal_(reference.weight)
    synced = SyncedBatchNorm1d.from_batch_norm(reference)
    x = torch.randn(10, 8)
    assert torch.equal(synced(x), reference(x))
    assert synced.state_dict().keys() == reference.state_dict().keys()
    assert repr(synced).startswith("SyncedBatchNorm1d(8")


def test_channel_moments_and_their_gradient():
    from torch_wge.distributed.batch_norm import ChannelMoments

    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.allclose(ChannelMoments.apply(x), torch.cat([x.sum(0), (x * x).sum(0)]), rtol=1e-14, atol=0)
    assert torch.autograd.gradcheck(ChannelMoments.apply, (x,))
    # float32 channels whose mean is 10^5 times their standard deviation: the variance from the moments is
    # that of float64 two-pass arithmetic on the same numbers to 1e-5, where float32 sums of squares
    # (relative error 1e-7 of sum x^2 = 10^10 times the variance) would miss it entirely
    rows = (100.0 + 1e-3 * torch.randn(100_000, 3, generator=torch.Generator().manual_seed(0))).requires_grad_()
    moments = ChannelMoments.apply(rows)
    assert moments.dtype == torch.float64
    mean = moments[:3] / rows.size(0)
    variance = moments[3:] / rows.size(0) - mean * mean
    exact = rows.detach().double()
    assert torch.allclose(mean, exact.mean(0), rtol=1e-12, atol=0)
    assert torch.allclose(variance, exact.var(0, correction=0), rtol=1e-5, atol=0)
    moments.sum().backward()
    assert rows.grad.dtype == torch.float32 and torch.allclose(rows.grad, 1 + 2 * rows.detach())
    # an empty batch (a process may hold none) has zero sums
    assert torch.equal(ChannelMoments.apply(torch.empty(0, 3)), torch.zeros(6, dtype=torch.float64))


def test_convert_replaces_every_batch_norm_and_keeps_its_state():
    decoders = torch.nn.ModuleList([torch.nn.BatchNorm1d(4), torch.nn.Sequential(torch.nn.BatchNorm1d(4))])
    torch.nn.init.normal_(decoders[0].weight)
    before = {k: v.clone() for k, v in decoders.state_dict().items()}
    converted = SyncedBatchNorm1d.convert(decoders)
    assert converted is decoders
    assert isinstance(decoders[0], SyncedBatchNorm1d) and isinstance(decoders[1][0], SyncedBatchNorm1d)
    assert all(torch.equal(before[k], v) for k, v in decoders.state_dict().items())


def test_one_process_context_without_torchrun(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    context = DistributedContext.from_environment("cpu")
    assert not context.enabled and context.is_main and context.backend is None
    assert context.shard(7) == (0, 7) and context.sum(2.5) == 2.5
    assert context.on_main(lambda: 42) == 42
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        DistributedContext.from_environment("cpu")


def _rank_dies_job(rank, out):
    """Rank 1 dies in its second epoch; rank 0 reports as the command line does."""
    import contextlib
    import io
    import warnings

    from torch_wge.cli import run_reporting_errors

    warnings.simplefilter("ignore")  # stderr: the error lines only

    real_epoch = Trainer.train_epoch

    def train_epoch(self, *args):
        if rank == 1 and self.epoch == 1:
            os._exit(9)  # as a kill -9
        return real_epoch(self, *args)

    Trainer.train_epoch = train_epoch
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = run_reporting_errors(
            "torch-wge train", lambda: Trainer(make_config(epochs=3), make_data(), out, progress=False).fit()
        )
    Path(out, f"exit-rank{rank}.json").write_text(json.dumps({"code": code, "stderr": err.getvalue()}))


def test_a_killed_rank_ends_the_others_with_one_line(tmp_path):
    context = mp.start_processes(
        _entry,
        args=(WORLD_SIZE, _free_port(), partial(_rank_dies_job, out=tmp_path)),
        nprocs=WORLD_SIZE,
        join=False,
        start_method=START_METHOD,
    )
    for process in context.processes:
        process.join(120)
        if process.is_alive():
            process.kill()
    assert context.processes[1].exitcode == 9
    report = json.loads((tmp_path / "exit-rank0.json").read_text())
    lines = report["stderr"].splitlines()
    assert report["code"] == 2 and "Traceback" not in report["stderr"], report["stderr"]
    assert len(lines) == 1 and lines[0].startswith("torch-wge train: error (rank 0): another process of the run ended")


class _CallNames:
    """A tracker that keeps the names of the methods called on it."""

    def __init__(self):
        self.calls = []

    def start(self, settings, epoch):
        self.calls.append("start")

    def log_epoch(self, epoch, figures):
        self.calls.append(f"epoch {epoch}")

    def log_validation(self, epoch, metrics):
        self.calls.append(f"valid {epoch}")

    def close(self):
        self.calls.append("close")


def _tracked_job(rank, out):
    tracker = _CallNames()
    Trainer(make_config(epochs=2), make_data(), out, progress=False, trackers=[tracker]).fit()
    Path(out, f"tracker-rank{rank}.json").write_text(json.dumps(tracker.calls))


def test_only_rank_0_reports_to_trackers(tmp_path):
    run_processes(partial(_tracked_job, out=tmp_path))
    rank_0 = json.loads((tmp_path / "tracker-rank0.json").read_text())
    assert rank_0 == ["start", "epoch 1", "valid 1", "epoch 2", "valid 2", "close"]
    assert json.loads((tmp_path / "tracker-rank1.json").read_text()) == []
