"""A whole WGE training step as one CUDA graph: an experiment toward a GPU step
that is not bound by kernel launches.

On a GPU a WGE step waits on its Python side: a FB15k-237 step of the large
recipe launches about 410 kernels for about 3.5 ms of GPU work on an H200, and
takes about 14 ms. A CUDA graph replays all of a step's kernels with one
launch, but it needs a step whose shapes never change, while a batch's positive
pairs vary in number. Here the step scores every entity (``--candidates 0``,
as good or better than sampled candidates on FB15k-237 at equal epochs), and
the positive pairs are padded to a fixed count with pairs of weight 0
(``WGE.query_loss(pair_weights=...)``, which leaves the softmax objective
unchanged). The step (encoder, queries, loss, backward, gradient clipping and
AdamW's fused, capturable update with the learning rate as a tensor) is
captured once and replayed for each batch, whose tensors are copied into the
graph's input buffers without waiting.

The check (on any device; captured on CUDA): a few steps of the static step
against the trainer's step, dropout off, in float64, by their losses. Then on
CUDA (``--device cuda``) the seconds an epoch takes, eager trainer against
graph replays, over the same ``--max-batches`` batches, with their losses.

Example (on a GPU machine, from the repository root)::

    python benchmarks/gpu_graph_step.py --dataset fb15k-237 --data-dir data/datasets --device cuda \\
        --json graph-step.json
"""

import argparse
import copy
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import torch
from bench_speed import DEFAULT_DATA, limit_batches, prepare_root, write_record
from torch import Tensor


class StaticBatch:
    """The device buffers a captured step reads: heads and relations ``[B]``, pairs ``[2, P_max]``
    and their weights ``[P_max]`` (0 for padding); :meth:`load` fills them from a batch without
    waiting."""

    def __init__(self, batch_size: int, max_pairs: int, device: torch.device, dtype: torch.dtype = torch.float32):
        self.batch_size, self.max_pairs = batch_size, max_pairs
        self.flat = torch.zeros(2 * batch_size + 2 * max_pairs, dtype=torch.long, device=device)
        self.heads, self.relations = self.flat[:batch_size], self.flat[batch_size : 2 * batch_size]
        self.pairs = self.flat[2 * batch_size :].view(2, max_pairs)
        self.weights = torch.zeros(max_pairs, device=device, dtype=dtype)

    def load(self, heads: Tensor, relations: Tensor, positives: Tensor) -> None:
        num_pairs = positives.size(1)
        if heads.numel() != self.batch_size or num_pairs > self.max_pairs:
            raise ValueError(
                f"batch of {heads.numel()} queries, {num_pairs} pairs: not {self.batch_size}, <= {self.max_pairs}"
            )
        pairs = torch.zeros(2, self.max_pairs, dtype=torch.long)
        pairs[:, :num_pairs] = positives
        weights = torch.zeros(self.max_pairs, dtype=self.weights.dtype)
        weights[:num_pairs] = 1.0
        flat = torch.cat([heads, relations, pairs.view(-1)])
        pinned = self.flat.device.type == "cuda"
        self.flat.copy_(flat.pin_memory() if pinned else flat, non_blocking=True)
        self.weights.copy_(weights.pin_memory() if pinned else weights, non_blocking=True)


class StaticStep:
    """One training step with static shapes on ``trainer``'s model: forward, backward, clipping and a
    capturable fused AdamW step (its own optimiser, the learning rate a tensor). :meth:`capture`
    records it as a CUDA graph; :meth:`__call__` runs it (replays the graph once captured)."""

    def __init__(self, trainer, batch: StaticBatch):
        self.model, self.graph_inputs, self.batch = trainer.model, trainer.graph_inputs, batch
        self.grad_clip = trainer.config.grad_clip
        device = batch.flat.device
        dtype = next(self.model.parameters()).dtype  # a float32 lr would round a float64 model's steps
        self.lr = torch.tensor(trainer.config.lr, device=device, dtype=dtype)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=self.lr,
            weight_decay=trainer.config.weight_decay,
            fused=device.type in ("cpu", "cuda"),
            capturable=device.type == "cuda",
        )
        self.graph = None
        self.loss = torch.zeros((), device=device)

    def _step(self) -> Tensor:
        encoded = self.model.encode(**self.graph_inputs)
        batch = self.batch
        loss = self.model.query_loss(encoded, batch.heads, batch.relations, batch.pairs, pair_weights=batch.weights)
        loss.backward()
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip, foreach=True)
        self.optimizer.step()
        return loss.detach()

    def capture(self, warmup_batches: List[Tuple[Tensor, Tensor, Tensor]]) -> None:
        """Warms up on a side stream with ``warmup_batches`` (real steps), then records the step."""
        self.model.train()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for batch in warmup_batches:
                self.batch.load(*batch)
                self.optimizer.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def __call__(self, heads: Tensor, relations: Tensor, positives: Tensor) -> Tensor:
        self.batch.load(heads, relations, positives)
        if self.graph is not None:
            self.graph.replay()
            return self.loss
        self.optimizer.zero_grad(set_to_none=True)
        return self._step()


def full_batches(trainer, batch_size: int, generator: torch.Generator):
    """The epoch's batches of exactly ``batch_size`` queries, as CPU tensors."""
    return [
        trainer.queries.batch(index)
        for index in trainer.queries.batch_indices(batch_size, generator)
        if index.numel() == batch_size
    ]


def make_trainer(args, root: Path, out: Path, dropout: bool = True):
    from torch_wge.training import TrainConfig, Trainer, load_data

    config = TrainConfig(
        dataset=args.dataset,
        root=str(root),
        recipe="large",
        device=args.device,
        candidates=0,
        batch_size=args.batch_size,
        hidden_channels=args.hidden_channels,
        **({} if dropout else {"dropout": 0.0}),
    )
    _, data = load_data(config, log=False)
    return Trainer(config, data, out_dir=out, progress=False)


def check(args, root: Path, tmp: Path, capture: bool) -> Dict[str, object]:
    """In float64, ``args.check_steps`` steps of the static step (captured when ``capture``)
    against the trainer's eager step, dropout off: the largest relative difference of a step's
    loss. Both run two more steps first: the static step's warm-up (before its capture)."""
    trainer = make_trainer(args, root, tmp / "check", dropout=False)
    trainer.model.double()  # in float64, so that Adam's normalised steps do not amplify rounding
    for name, adjacency in trainer.graph_inputs.items():  # the dict the loss module reads
        trainer.graph_inputs[name] = adjacency.double()
    reference = copy.deepcopy(trainer.model.state_dict())
    batches = full_batches(trainer, args.batch_size, torch.Generator().manual_seed(1))[: args.check_steps + 2]
    device = trainer.device

    eager_losses = []
    trainer.model.train()
    for heads, relations, positives in batches:
        loss = trainer.loss_module(*(t.to(device) for t in (heads, relations, positives)))
        trainer.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), trainer.config.grad_clip, foreach=True)
        trainer.optimizer.step()
        eager_losses.append(loss.item())
    eager_losses = eager_losses[2:]

    trainer.model.load_state_dict(reference)
    trainer.optimizer = None
    max_pairs = max(b[2].size(1) for b in batches) + 5  # and some padding in every batch
    static = StaticStep(trainer, StaticBatch(args.batch_size, max_pairs, device, torch.float64))
    if capture:
        static.capture(batches[:2])
    else:
        for batch in batches[:2]:
            static(*batch)
    static_losses = [static(*batch).item() for batch in batches[2:]]
    return {
        "step_loss_rel_diff": max(abs(a - b) / abs(b) for a, b in zip(static_losses, eager_losses)),
        "eager_losses": eager_losses,
        "static_losses": static_losses,
    }


def timing(args, root: Path, tmp: Path) -> Dict[str, object]:
    """Seconds an epoch of ``args.max_batches`` full batches takes, eager trainer and graph replays,
    each over the same batches (dropout on), the median of ``args.epochs_timed`` after a warm-up."""
    out: Dict[str, object] = {}
    for side in ("eager", "graph"):
        trainer = make_trainer(args, root, tmp / side)
        limit_batches(trainer, args.max_batches, args.batch_size)
        times, losses = [], []
        if side == "graph":
            batches = full_batches(trainer, args.batch_size, torch.Generator().manual_seed(0))
            max_pairs = max(b[2].size(1) for b in batches)
            trainer.optimizer = None
            step = StaticStep(trainer, StaticBatch(args.batch_size, max_pairs, trainer.device))
            step.capture(batches[:3])
        for epoch in range(1 + args.epochs_timed):
            torch.cuda.synchronize()
            tic = time.perf_counter()
            if side == "eager":
                loss = trainer.train_epoch()
            else:
                trainer.model.train()
                total = torch.zeros((), device=trainer.device)
                batches = full_batches(trainer, args.batch_size, trainer.generator)
                for batch in batches:
                    total += step(*batch)
                loss = total.item() / len(batches)
            torch.cuda.synchronize()
            if epoch:
                times.append(time.perf_counter() - tic)
                losses.append(loss)
        num_batches = trainer.queries.num_batches(args.batch_size)
        out[side] = {"seconds": times, "losses": losses, "batches": num_batches}
        out[f"{side}_epoch_s"] = statistics.median(times) * args.full_batches / num_batches
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fb15k-237")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder holding DATASET/train.txt")
    parser.add_argument("--device", default="cpu", help="cpu (the check only) or cuda")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--hidden-channels", type=int, default=64)
    parser.add_argument("--check-steps", type=int, default=4, help="steps compared with the eager step (default: 4)")
    parser.add_argument("--max-batches", type=int, default=40, help="batches a timed epoch runs (default: 40)")
    parser.add_argument("--epochs-timed", type=int, default=3)
    parser.add_argument(
        "--full-batches", type=int, default=147, help="batches of a full epoch, to scale to (default: FB15k-237's 147)"
    )
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("gpu_graph_step.py: --device cuda, but CUDA is not available")
    torch.manual_seed(0)
    tmp = Path(tempfile.mkdtemp(prefix="gpu_graph_step_"))
    try:
        prepare_root(args.data_dir, args.dataset, tmp / "root")
        result: Dict[str, object] = {}
        parts = [("check", lambda: check(args, tmp / "root", tmp, capture=cuda))]
        parts += [("timing", lambda: timing(args, tmp / "root", tmp))] if cuda else []
        for name, run in parts:  # an experiment: a part that fails is recorded, and the next one runs
            try:
                result[name] = run()
            except Exception as error:  # noqa: BLE001
                result[name] = {"error": f"{type(error).__name__}: {error}"}
            shown = {k: v for k, v in result[name].items() if "diff" in k or "epoch_s" in k or k == "error"}
            print(f"{name}: {shown}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        write_record(args.json, "gpu_graph_step", {"config": {k: str(v) for k, v in vars(args).items()}, **result})
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
