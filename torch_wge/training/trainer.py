import json
import math
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

import torch
from torch_geometric.data import Data
from tqdm.auto import tqdm

from torch_wge import __version__
from torch_wge.evaluation import LinkPredictionEvaluator, LinkPredictionResults
from torch_wge.training.checkpoint import CheckpointError, check_compatible, load_checkpoint, save_checkpoint
from torch_wge.training.config import TrainConfig
from torch_wge.training.data import graph_sizes, split_triples
from torch_wge.training.inference import evaluate_model
from torch_wge.training.model import build_model, resolve_device
from torch_wge.training.queries import TrainingQueries


class Trainer:
    r"""Trains a :class:`~torch_wge.nn.WGE` model with 1-N scoring and selects
    the checkpoint with the best filtered validation MRR.

    Every epoch shuffles the distinct (head, relation) training queries (inverse
    relations included), and for each batch encodes the whole graph, scores the
    queries against all entities at every layer and takes an Adam step on the
    weighted BCE loss with gradient-norm clipping. Every ``eval_every`` epochs
    (and after the last) the validation split is ranked; the best model so far
    goes to ``best.pt``. After training the best model is evaluated on the
    validation and test splits.

    Files in ``out_dir``:

    - ``last.pt``: model, optimiser, epoch, best-so-far and RNG states after
      the latest epoch, written atomically; :meth:`fit` with ``resume=True``
      continues from it and reaches the same state as an uninterrupted run.
    - ``best.pt``: the model with the best validation MRR and its config.
    - ``log.jsonl``: one JSON object per epoch (loss, seconds) and per
      evaluation (all metrics).
    - ``results.json``: config, best epoch, best validation and test metrics
      (overall, per side and per relation), wall time and versions.

    Args:
        config (TrainConfig): The run's settings.
        data (Data): The graph with its views (see :func:`load_data`).
        out_dir (str or Path): Folder for checkpoints and logs.
        progress (bool, optional): Show progress bars. (default: :obj:`True`)
    """

    def __init__(self, config: TrainConfig, data: Data, out_dir: Union[str, Path], progress: bool = True):
        config.validate()
        self.config = config
        self.out_dir = Path(out_dir)
        self.progress = progress
        self.device = resolve_device(config.device)
        self.graph = graph_sizes(data)

        torch.manual_seed(config.seed)
        self.model = build_model(config, data).to(self.device)
        self.graph_inputs = {k: v.to(self.device) for k, v in self.model.graph_inputs(data).items()}
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.generator = torch.Generator().manual_seed(config.seed)

        self.queries = TrainingQueries(split_triples(data, "train"), self.graph["num_entities"], self.graph["num_relations"])
        known = split_triples(data, "all")
        self.evaluators = {
            split: LinkPredictionEvaluator(
                split_triples(data, split), known, self.graph["num_entities"], self.graph["num_relations"]
            )
            for split in ("valid", "test")
        }
        self.epoch = 0
        self.wall_seconds = 0.0  # training and validation time over all sessions of this run
        self.best: Dict[str, Any] = {"epoch": None, "mrr": -math.inf, "evaluations_since": 0}

    # ----------------------------------------------------------------- steps
    def train_epoch(self) -> float:
        """One pass over all training queries; returns the mean batch loss."""
        self.model.train()
        total, batches = 0.0, 0
        for heads, relations, positives in self.queries.batches(self.config.batch_size, self.generator):
            heads, relations, positives = heads.to(self.device), relations.to(self.device), positives.to(self.device)
            encoded = self.model.encode(**self.graph_inputs)
            loss = self.model.loss(encoded, heads, relations, positives)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip, foreach=True)
            self.optimizer.step()
            total += loss.item()
            batches += 1
        return total / max(batches, 1)

    def evaluate(self, split: str = "valid") -> LinkPredictionResults:
        """Filtered ranking of ``split`` (valid or test), both directions, encoder run once."""
        return evaluate_model(self.model, self.graph_inputs, self.evaluators[split], self.config.eval_batch_size)

    # ----------------------------------------------------------- checkpoints
    def state(self) -> Dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "graph": self.graph,
            "epoch": self.epoch,
            "wall_seconds": self.wall_seconds,
            "best": self.best,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "shuffle": self.generator.get_state(),
            },
            "version": __version__,
        }

    def load_state(self, path: Union[str, Path]) -> None:
        """Restores a ``last.pt`` written by this trainer (same dataset and model settings)."""
        state = load_checkpoint(path, map_location=self.device)
        if "optimizer" not in state:
            raise CheckpointError(f"{path} holds no training state (only a model); it cannot be resumed")
        check_compatible(state, self.config.to_dict(), self.graph, path)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch, self.best, self.wall_seconds = state["epoch"], state["best"], state["wall_seconds"]
        torch.set_rng_state(state["rng"]["torch"].cpu())
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        self.generator.set_state(state["rng"]["shuffle"].cpu())

    def _truncate_log(self) -> None:
        """Drops log records of epochs after the resumed checkpoint (a killed
        run may have logged an epoch whose checkpoint it never wrote)."""
        log = self.out_dir / "log.jsonl"
        if log.is_file():
            records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            kept = [r for r in records if r.get("event") != "final" and r.get("epoch", 0) <= self.epoch]
            log.write_text("".join(json.dumps(r) + "\n" for r in kept))

    def _log(self, record: Dict[str, Any]) -> None:
        with open(self.out_dir / "log.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")

    # ------------------------------------------------------------------ fit
    def fit(self, resume: bool = False) -> Dict[str, Any]:
        """Trains for ``config.epochs`` epochs (or until early stopping), then
        evaluates the best checkpoint; returns the content of ``results.json``."""
        start_time = time.perf_counter()
        last = self.out_dir / "last.pt"
        if resume:
            if not last.is_file():
                raise CheckpointError(f"nothing to resume: {last} does not exist")
            self.load_state(last)
            self._truncate_log()
        elif last.exists():
            raise FileExistsError(
                f"{self.out_dir} already holds a run; pass resume=True (--resume) to continue it "
                f"or choose another output folder"
            )
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2))

        cfg = self.config
        bar = tqdm(total=cfg.epochs, initial=self.epoch, desc="epochs", unit="epoch", disable=not self.progress)
        while self.epoch < cfg.epochs and not self._should_stop():
            tic = time.perf_counter()
            loss = self.train_epoch()
            self.epoch += 1
            seconds = time.perf_counter() - tic
            self.wall_seconds += seconds
            self._log({"event": "epoch", "epoch": self.epoch, "loss": loss, "seconds": seconds,
                       "wall_seconds": self.wall_seconds})
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", best_mrr=f"{max(self.best['mrr'], 0):.4f}")
            if self.epoch % cfg.eval_every == 0 or self.epoch == cfg.epochs:
                self._validate(bar)
            save_checkpoint(self.state(), last)
        bar.close()
        return self._finish(time.perf_counter() - start_time)

    def _should_stop(self) -> bool:
        patience = self.config.patience
        return patience is not None and self.best["evaluations_since"] >= patience

    def _validate(self, bar) -> None:
        tic = time.perf_counter()
        results = self.evaluate("valid")
        seconds = time.perf_counter() - tic
        self.wall_seconds += seconds
        mrr = results["both.mrr"]
        improved = mrr > self.best["mrr"]
        if improved:
            self.best = {"epoch": self.epoch, "mrr": mrr, "evaluations_since": 0}
            save_checkpoint(
                {"config": self.config.to_dict(), "graph": self.graph, "epoch": self.epoch,
                 "model": self.model.state_dict(), "valid": results.to_flat_dict(), "version": __version__},
                self.out_dir / "best.pt",
            )
        else:
            self.best["evaluations_since"] += 1
        self._log({"event": "eval", "split": "valid", "epoch": self.epoch, "seconds": seconds,
                   "wall_seconds": self.wall_seconds, **results.to_flat_dict()})
        bar.write(f"epoch {self.epoch:5d} | valid {results.summary_line()} | {seconds:.2f}s" + (" | best" if improved else ""))

    def _finish(self, seconds: float) -> Dict[str, Any]:
        best_path = self.out_dir / "best.pt"
        if best_path.is_file():
            self.model.load_state_dict(load_checkpoint(best_path, map_location=self.device)["model"])
        valid, test = self.evaluate("valid"), self.evaluate("test")
        record = {
            "config": self.config.to_dict(),
            "graph": self.graph,
            "epochs_trained": self.epoch,
            "best_epoch": self.best["epoch"],
            "valid": valid.to_dict(),
            "test": test.to_dict(),
            "wall_seconds": self.wall_seconds,
            "wall_seconds_this_session": seconds,
            "device": str(self.device),
            "threads": torch.get_num_threads(),
            "versions": {"torch_wge": __version__, "torch": torch.__version__},
        }
        (self.out_dir / "results.json").write_text(json.dumps(record, indent=2))
        self._log({"event": "final", "best_epoch": self.best["epoch"], "valid": valid.to_flat_dict(), "test": test.to_flat_dict()})
        return record
