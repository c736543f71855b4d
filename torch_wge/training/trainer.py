import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union, cast

import torch
from torch import Tensor
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau
from torch_geometric.data import Data
from tqdm.auto import tqdm

from torch_wge import __version__, io
from torch_wge.data import unseen_triples
from torch_wge.distributed import DistributedContext, dropout_seed
from torch_wge.evaluation import LinkPredictionEvaluator, LinkPredictionResults
from torch_wge.nn import WGE
from torch_wge.nn.decoders.loss import sample_candidates
from torch_wge.training import validation
from torch_wge.training.batch_loss import BatchLoss
from torch_wge.training.checkpoint import CheckpointError, save_checkpoint, triples_fingerprint
from torch_wge.training.config import TrainConfig
from torch_wge.training.data import graph_sizes, split_triples
from torch_wge.training.ema import WeightAverage
from torch_wge.training.evaluate import evaluate_model
from torch_wge.training.model import build_loss, build_model, check_memory
from torch_wge.training.precision import float32_matmul_precision, resolve_precision
from torch_wge.training.queries import TrainingQueries
from torch_wge.training.run_folder import RunLock, RunLog, open_run_folder, repair_best
from torch_wge.training.trackers import Tracker


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads a duration: ``"42 s"``, ``"12 min"`` or ``"3.5 h"``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


class TrainingError(RuntimeError):
    """A run that cannot go on (its loss is no longer finite, or it resumes with a time limit it has
    used up)."""


#: Makes the optimiser of the parameters it is given, e.g. ``functools.partial(torch.optim.SGD, lr=0.1)``.
OptimizerFactory = Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]
#: Makes the learning-rate scheduler of an optimiser, e.g. ``functools.partial(StepLR, step_size=10)``.
SchedulerFactory = Callable[[torch.optim.Optimizer], LRScheduler]


class Trainer:
    r"""Trains a :class:`~torch_wge.nn.WGE` model with 1-N scoring and selects
    the checkpoint with the best filtered validation MRR.

    Every epoch shuffles the distinct (head, relation) training queries (inverse
    relations included), and for each batch encodes the whole graph, scores the
    queries against all entities at every layer and takes an optimiser step
    (by default the recipe's AdamW, see ``optimizer``) on the training objective
    with gradient-norm clipping. Every ``eval_every`` epochs
    (and after the last) the validation split is ranked; the best model so far
    goes to ``best.pt``. After training the best model is evaluated on the
    validation and test splits. With ``ema_decay > 0`` the model that is
    validated, kept as the best and tested is the moving average of the
    weights (:class:`~torch_wge.training.ema.WeightAverage`, updated after
    every step); the trained weights are validated too and their metrics
    logged under ``"trained_weights"``.

    Files in ``out_dir``:

    - ``last.pt``: model, optimiser, scheduler, epoch, best-so-far and RNG states after
      the latest epoch; :meth:`fit` with ``resume=True`` continues from it
      and reaches the same state as an uninterrupted run. In an epoch that
      improves on the best, it also holds the new best weights, so that
      ``best.pt`` can be rewritten from it if a kill came between the two.
    - ``best.pt``: the model with the best validation MRR and its config.
    - ``log.jsonl``: one JSON object per epoch (loss, seconds) and per
      evaluation (all metrics), appended; a resume drops the records after
      ``last.pt``'s epoch, so every epoch appears once.
    - ``results.json``: config, best epoch, best validation and test metrics
      (overall, per side and per relation), the number of validation and
      test triples ranked although their entity or relation is not in
      training (``"unseen"``), wall time and versions.
    - ``config.json``: the settings.

    The folder is locked (an ``flock`` on the folder itself) while a run
    writes there, so a second run into the same folder is refused.

    Every file is written atomically (see :mod:`torch_wge.io`): a kill at any
    instant loses at most the epoch in progress, and a resume continues from
    the last complete one. A resume refuses changed settings other than
    :data:`~torch_wge.training.checkpoint.RESUMABLE_CHANGES`. A loss that
    is no longer finite stops the run with :class:`TrainingError` before the
    epoch is saved.

    **Several processes.** Started by ``torchrun`` (``WORLD_SIZE > 1`` in the
    environment, or a process group already initialised), the trainer joins
    the process group and trains data-parallel: every process holds the
    model and the graph, computes its share of the encoder's node rows
    (``encoder="sharded"``, the default) or the whole encoder
    (``"replicated"``), takes its contiguous part of every global batch of
    ``batch_size`` queries, and gradients are averaged with
    :class:`~torch.nn.parallel.DistributedDataParallel`; the decoders' batch
    norms are synchronised, evaluation is sharded, and only rank 0 writes
    files or shows progress. See :mod:`torch_wge.distributed.context` for
    what equals a one-process run (everything but the dropout masks).

    Args:
        config (TrainConfig): The run's settings.
        data (Data): The graph with its views (see :func:`load_data`).
        out_dir (str or Path): Folder for checkpoints and logs.
        progress (bool, optional): Show progress bars and a first line naming
            the run folder (and the epoch a resumed run continues from).
            (default: :obj:`True`)
        backend (str, optional): Process-group backend when started by
            ``torchrun``. (default: ``"nccl"`` on CUDA, ``"gloo"`` on the CPU)
        vocabulary (str, optional): :func:`~torch_wge.training.checkpoint.vocabulary_digest`
            of the dataset, stored in the checkpoints so that evaluation on
            data numbered otherwise is refused. (default: :obj:`None`)
        on_validation (callable, optional): Called as ``on_validation(epoch, mrr)``
            after each validation, once the epoch is saved, with the filtered
            validation MRR (``both.mrr``). An exception it raises ends :meth:`fit`
            with the run folder holding that epoch (``last.pt``, the log), as
            a hyperparameter search's pruner does (see :mod:`torch_wge.tune`).
            (default: :obj:`None`)
        trackers (list of Tracker, optional): Where the main process also
            reports the settings, every epoch and every validation of the log
            (see :mod:`torch_wge.training.trackers`), e.g. a
            :class:`~torch_wge.training.trackers.TensorBoardTracker`. (default: none)
        rank_test (bool, optional): Whether :meth:`fit` ends by ranking the
            test split with the best checkpoint. A hyperparameter search's
            trials do not: a study chooses on validation only, and the chosen
            trial is ranked on test once, afterwards; their ``results.json``
            then holds ``"test": null``. (default: :obj:`True`)
        optimizer (callable, optional): Makes the optimiser from the model's
            parameters, as ``optimizer(model.parameters())``: for instance
            ``functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9)``.
            (default: the recipe's AdamW, ``lr=config.lr`` and
            ``weight_decay=config.weight_decay``, with its fused step on the
            CPU and CUDA)
        scheduler (callable, optional): Makes a learning-rate scheduler of the
            optimiser, as ``scheduler(optimizer)``, stepped (without arguments)
            once after every epoch: for instance
            ``functools.partial(torch.optim.lr_scheduler.StepLR, step_size=10)``.
            Its state is saved in ``last.pt`` and restored on a resume, which
            needs a scheduler made the same way. Without it, the config's
            schedule (:meth:`TrainConfig.learning_rate`: warm-up, then cosine
            decay or constant) sets each parameter group's learning rate every
            epoch, scaled by the group's own rate over ``config.lr`` (the
            default optimiser's rate is ``config.lr``, so the schedule itself).
            (default: :obj:`None`)
    """

    def __init__(
        self,
        config: TrainConfig,
        data: Data,
        out_dir: Union[str, Path],
        progress: bool = True,
        backend: Optional[str] = None,
        vocabulary: Optional[str] = None,
        on_validation: Optional[Callable[[int, float], None]] = None,
        trackers: Sequence[Tracker] = (),
        rank_test: bool = True,
        optimizer: Optional[OptimizerFactory] = None,
        scheduler: Optional[SchedulerFactory] = None,
    ):
        config.validate()
        self.config = config
        self.rank_test = rank_test
        self.on_validation = on_validation
        self.vocabulary = vocabulary
        self.out_dir = Path(out_dir)
        self.progress = progress
        self.dist = DistributedContext.from_environment(config.device, backend)
        self.device = self.dist.device
        self.graph = graph_sizes(data)

        check_memory(config, self.graph, self.device)
        torch.manual_seed(config.seed)
        self.model = build_model(config, data, self.device).to(self.device)
        self.graph_inputs = {k: v.to(self.device) for k, v in self.model.graph_inputs(data).items()}
        # made before the batch norms are synchronised: the average is only evaluated
        self.ema = WeightAverage(self.model, config.ema_decay) if config.ema_decay > 0 else None
        self.dist.distribute(self.model, config.encoder)
        if self.ema is not None and config.encoder == "sharded":  # evaluated with the same shares
            self.dist.distribute(self.ema.model, config.encoder)
        #: ``config.precision`` on this device (``"auto"`` resolved, see :func:`resolve_precision`).
        self.precision = resolve_precision(config.precision, self.device)
        self.loss_fn = build_loss(config, self.device)
        # the training loss as a module: DistributedDataParallel hooks on forward
        self.loss_module = self.dist.data_parallel(BatchLoss(self.model, self.loss_fn, self.graph_inputs))
        # AdamW with weight_decay 0 is Adam; its fused step makes one pass over each parameter: on the
        # CPU several times faster than the default, on a GPU one kernel launch for all parameters
        if optimizer is None:
            fused = True if self.device.type in ("cpu", "cuda") else None
            self.optimizer: torch.optim.Optimizer = torch.optim.AdamW(
                self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=fused
            )
        else:
            self.optimizer = optimizer(self.model.parameters())
            if not isinstance(self.optimizer, torch.optim.Optimizer):
                raise TypeError(
                    f"Trainer: optimizer made a {type(self.optimizer).__name__}, not a torch.optim.Optimizer"
                )
        # without a scheduler, the config's schedule scales each group's rate as the optimiser set it
        self._lr_scales = [group["lr"] / config.lr for group in self.optimizer.param_groups]
        self.scheduler = None if scheduler is None else scheduler(self.optimizer)
        if self.scheduler is not None and not isinstance(self.scheduler, LRScheduler):
            raise TypeError(f"Trainer: scheduler made a {type(self.scheduler).__name__}, not an LRScheduler")
        if isinstance(self.scheduler, ReduceLROnPlateau):
            raise TypeError(
                "Trainer: ReduceLROnPlateau steps on a metric; the trainer steps its scheduler once an epoch"
            )
        self.epoch_lr = float(self.optimizer.param_groups[0]["lr"])  # the rate of the latest epoch (the log's)
        self.generator = torch.Generator().manual_seed(config.seed)

        train = split_triples(data, "train")
        self.train_triples = triples_fingerprint(train)
        self.queries = TrainingQueries(train, self.graph["num_entities"], self.graph["num_relations"])
        known = split_triples(data, "all")
        self.evaluators = {
            split: LinkPredictionEvaluator(
                split_triples(data, split), known, self.graph["num_entities"], self.graph["num_relations"]
            )
            for split in ("valid", "test")
        }
        self.log = RunLog(self.out_dir / "log.jsonl", enabled=self.dist.is_main, trackers=trackers)
        self._lock: Optional[RunLock] = None  # held while fit() runs
        #: Validation and test triples ranked although their entity or relation is not in training.
        self.unseen_ranked = {split: int(unseen_triples(data, split).sum()) for split in ("valid", "test")}
        self.epoch = 0
        #: Where a run stopped by its time limit inside an epoch left it (see :meth:`train_epoch`).
        self.epoch_progress: Optional[Dict[str, Any]] = None
        #: ``"time_limit"`` once the time limit has ended the run, else :obj:`None`.
        self.stopped_by: Optional[str] = None
        self.wall_seconds = 0.0  # training and validation time over all sessions of this run
        self.best: Dict[str, Any] = {"epoch": None, "mrr": -math.inf, "evaluations_since": 0}

    # ----------------------------------------------------------------- steps
    def train_epoch(self, on_step: Optional[Callable[[], None]] = None) -> Optional[float]:
        """One pass over all training queries; returns the mean batch loss, or
        :obj:`None` when the time limit ended the epoch before its last step.

        The global batches of ``batch_size`` queries are
        :meth:`TrainingQueries.batch_indices`, drawn with the run's generator;
        with several processes each takes its contiguous part of every batch
        and scales its loss by its share (see
        :mod:`torch_wge.distributed.context`), and the returned loss is that
        of the global batches. ``on_step`` is called after every step (a
        progress bar's update).

        The time limit is checked after every step of a one-process run: an
        epoch it cuts short leaves :attr:`epoch_progress` (the steps done, the
        shuffling generator's state at the epoch's start and the loss so far),
        which ``last.pt`` keeps, so that a resumed run takes the same batches
        from the next step on."""
        self.loss_module.train()
        world = self.dist.world_size
        progress, self.epoch_progress = self.epoch_progress, None
        if self.dist.enabled:  # per-process dropout stream, reproducible on resume
            torch.manual_seed(dropout_seed(self.config.seed, self.epoch, self.dist.rank))
        if self.scheduler is None:  # the config's schedule
            for group, scale in zip(self.optimizer.param_groups, self._lr_scales):
                group["lr"] = self.config.learning_rate(self.epoch) * scale
        self.epoch_lr = float(self.optimizer.param_groups[0]["lr"])
        if progress is not None:  # the epoch a time limit cut short: its batches again, from its next step
            self.generator.set_state(progress["shuffle"])
        shuffle = self.generator.get_state()
        # the summed loss stays on the device: reading it each step would make a GPU's host wait
        done = 0 if progress is None else progress["step"]
        total = torch.full((), 0.0 if progress is None else progress["loss"], dtype=torch.float64, device=self.device)
        tic = time.perf_counter()
        chunks = self.queries.batch_indices(self.config.batch_size, self.generator)
        with float32_matmul_precision(self.precision):
            for step, chunk in enumerate(chunks):
                if step < done:
                    continue
                start, stop = self.dist.shard(chunk.numel())
                batch = self._batch(chunk[start:stop])
                scale = world * (stop - start) / chunk.numel() if world > 1 else 1.0
                loss = self.loss_module(*batch[:3], scale, batch[3:] or None)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if self.config.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip, foreach=True)
                self.optimizer.step()
                if self.ema is not None:
                    self.ema.update(self.model)
                total += loss.detach()
                if on_step is not None:
                    on_step()
                last = step + 1 == len(chunks)
                if not last and not self.dist.enabled and self._out_of_time(time.perf_counter() - tic):
                    self.epoch_progress = {"step": step + 1, "shuffle": shuffle, "loss": total.item()}
                    return None
        if self.scheduler is not None:
            self.scheduler.step()
        # the global batch's loss is the mean of the processes' scaled losses
        return self.dist.sum(total.item()) / world / max(len(chunks), 1)

    def _batch(self, index: Tensor) -> Tuple[Tensor, ...]:
        """The training queries ``index`` on the device: ``heads``, ``relations``,
        ``positives`` and, where the model samples candidates and the device is
        not the CPU, the candidates drawn on the CPU and the answers' positions
        among them (see :meth:`OneToNLoss.forward <torch_wge.nn.OneToNLoss.forward>`). Off the CPU they travel as one
        buffer, on CUDA pinned and copied without waiting for the device."""
        batch: Tuple[Tensor, ...] = self.queries.batch(index)
        if self.device.type == "cpu":
            return batch
        if self.loss_fn.candidates > 0 and index.numel() > 0:
            batch += sample_candidates(batch[2][1], self.model.num_entities, self.loss_fn.candidates)
        flat = torch.cat([t.reshape(-1) for t in batch])
        flat = (flat.pin_memory() if self.device.type == "cuda" else flat).to(self.device, non_blocking=True)
        return tuple(part.view(t.shape) for part, t in zip(flat.split([t.numel() for t in batch]), batch))

    @property
    def evaluated_model(self) -> WGE:
        """The model that is validated, kept as the best and tested: the
        weights' moving average with ``ema_decay > 0``, else the model trained."""
        return self.model if self.ema is None else cast(WGE, self.ema.model)  # the average is a copy of the model

    def evaluate(self, split: str = "valid", trained: bool = False) -> LinkPredictionResults:
        """Filtered ranking of ``split`` (valid or test) by :attr:`evaluated_model`
        (``trained``: by the trained weights), both directions, encoder run once
        (sharded over the processes of a distributed run; every process gets the results)."""
        with float32_matmul_precision(self.precision):
            return evaluate_model(
                self.model if trained else self.evaluated_model,
                self.graph_inputs,
                self.evaluators[split],
                self.config.eval_batch_size,
                distributed=self.dist,
            )

    # ----------------------------------------------------------- checkpoints
    def state(self) -> Dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "graph": self.graph,
            "epoch": self.epoch,
            "epoch_progress": self.epoch_progress,
            "wall_seconds": self.wall_seconds,
            "best": self.best,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "ema": None if self.ema is None else self.ema.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "shuffle": self.generator.get_state(),
            },
            "world_size": self.dist.world_size,
            "device": str(self.device),
            "precision": self.precision,
            "threads": torch.get_num_threads(),
            "version": __version__,
            "vocabulary": self.vocabulary,
            "train_triples": self.train_triples,
        }

    def best_state(self, model: Dict[str, Any], epoch: int, valid: Dict[str, float]) -> Dict[str, Any]:
        """The content of ``best.pt``: the best model's weights, epoch and validation metrics."""
        return {
            "config": self.config.to_dict(),
            "graph": self.graph,
            "epoch": epoch,
            "model": model,
            "valid": valid,
            "version": __version__,
            "vocabulary": self.vocabulary,
            "train_triples": self.train_triples,
        }

    def _read_state(self, path: Union[str, Path]) -> Dict[str, Any]:
        """The checked ``last.pt`` this run resumes from (see :func:`~torch_wge.training.validation.resume_checkpoint`)."""
        map_location = "cpu" if self.dist.enabled else self.device
        state = validation.resume_checkpoint(
            path, self.config, self.graph, self.vocabulary, self.train_triples, map_location
        )
        now = {
            "device": str(self.device),
            "precision": self.precision,
            "threads": torch.get_num_threads(),
            "optimizer": validation.optimizer_step_kind(self.optimizer.state_dict()),
        }
        if self.dist.is_main:
            validation.warn_rounding_changes(state, path, now)
        return state

    def _restore(self, state: Dict[str, Any], path: Union[str, Path]) -> None:
        validation.load_weights(self.model, state["model"], path)
        scheduler = state.get("scheduler")
        if (scheduler is None) != (self.scheduler is None):
            had = "no scheduler" if scheduler is None else "a scheduler"
            raise validation.StoredError(
                f"{path}: scheduler: the run was trained with {had}; resume it with "
                f"{'none' if scheduler is None else 'the same'} (Trainer(scheduler=...))"
            )
        validation.load_optimizer(self.optimizer, state["optimizer"], path)
        if self.scheduler is not None and scheduler is not None:
            try:
                self.scheduler.load_state_dict(scheduler)
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise validation.StoredError(
                    f"{path}: scheduler: does not fit this run's scheduler ({error})"
                ) from None
        if self.ema is not None:
            if "ema" not in state:
                raise validation.StoredError(f"{path}: ema: missing, while the run averages its weights")
            self.ema.load_state_dict(state["ema"])
        self.epoch, self.best, self.wall_seconds = state["epoch"], state["best"], state["wall_seconds"]
        self.epoch_progress = self._stored_progress(state.get("epoch_progress"), path)
        try:
            torch.set_rng_state(state["rng"]["torch"].cpu())
            if state["rng"]["cuda"] is not None and torch.cuda.is_available():
                torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])
            self.generator.set_state(state["rng"]["shuffle"].cpu())
        except RuntimeError as error:
            raise validation.StoredError(f"{path}: rng: damaged random-number state ({error})") from None

    def _stored_progress(self, progress: Any, path: Union[str, Path]) -> Optional[Dict[str, Any]]:
        """The ``epoch_progress`` of a ``last.pt``, checked: :obj:`None`, or the steps done
        (between 1 and the epoch's steps less one), the generator state and a finite loss."""
        if progress is None:
            return None
        steps = self.queries.num_batches(self.config.batch_size)
        shuffle = progress.get("shuffle") if isinstance(progress, dict) else None
        fits = (
            isinstance(progress, dict)
            and set(progress) == {"step", "shuffle", "loss"}
            and type(progress["step"]) is int
            and 0 < progress["step"] < steps
            and isinstance(shuffle, Tensor)
            and shuffle.dtype == torch.uint8
            and shuffle.shape == self.generator.get_state().shape
            and type(progress["loss"]) is float
            and math.isfinite(progress["loss"])
        )
        if not fits or self.epoch >= self.config.epochs:
            raise validation.StoredError(
                f"{path}: epoch_progress: not the progress of an epoch of this run "
                f"(steps 1 to {steps - 1} of epoch {self.epoch + 1} of {self.config.epochs})"
            )
        return progress

    def _open_run_folder(self, resume: bool, overwrite: bool = False) -> Optional[Dict[str, Any]]:
        """Opens the run folder (:func:`~torch_wge.training.run_folder.open_run_folder`)
        and writes ``config.json``. With ``resume``, returns the state of
        ``last.pt``, with ``best.pt`` and the log made consistent with it."""
        self._lock = open_run_folder(self.out_dir, resume, overwrite)
        state = None
        if resume:
            state = self._read_state(self.out_dir / "last.pt")
            repair_best(self.out_dir, state, lambda path: self._read_model(path)["epoch"], self.best_state)
            self.log.truncate(state["epoch"])
        io.write_json(self.out_dir / "config.json", self.config.to_dict())
        return state

    # ------------------------------------------------------------------ fit
    def fit(self, resume: bool = False, overwrite: bool = False) -> Dict[str, Any]:
        """Trains for ``config.epochs`` epochs (or until early stopping), then
        evaluates the best checkpoint; returns the content of ``results.json``.
        ``resume`` continues the run in ``out_dir`` from its ``last.pt``;
        ``overwrite`` replaces the files of a run there (a new run into a
        folder that holds one is refused otherwise)."""
        if resume and overwrite:
            raise ValueError("fit: resume and overwrite exclude each other")
        self._lock = None
        try:
            return self._fit(resume, overwrite)
        finally:
            if self._lock is not None:
                self._lock.release()
            self.log.close()

    def _fit(self, resume: bool, overwrite: bool) -> Dict[str, Any]:
        start_time = time.perf_counter()
        # the run folder is read and written by rank 0 only (other machines may not see it);
        # an error there is raised in every process
        state = self.dist.on_main(lambda: self._open_run_folder(resume, overwrite))
        if state is not None:  # resumed
            self._restore(state, self.out_dir / "last.pt")
        cfg = self.config
        if state is not None and self.epoch > cfg.epochs:
            raise TrainingError(
                f"--epochs {cfg.epochs}: the run in {self.out_dir} has trained {self.epoch} epochs already; "
                f"resume it with --epochs {self.epoch} or more"
            )
        if state is not None and self.epoch < cfg.epochs and self._out_of_time():
            raise TrainingError(
                f"--time-limit {cfg.time_limit:g}: the run in {self.out_dir} has trained "
                f"{self.wall_seconds / 60:.1f} minutes already (the limit counts all its sessions); "
                f"give a larger limit or none to resume it"
            )
        self.log.start(self.config.to_dict(), self.epoch)
        self._first_epoch = self.epoch
        show = self.progress and self.dist.is_main
        if show:
            tqdm.write(self._banner(resume), file=sys.stderr)
        interactive = show and sys.stderr.isatty()  # bars on a terminal, else a line per epoch
        bar = tqdm(total=cfg.epochs, initial=self.epoch, desc="epochs", unit="epoch", disable=not interactive)
        self._estimate_epoch_time = show  # said once a session, after the first steps
        while self.epoch < cfg.epochs and not self._should_stop() and not self._out_of_time():
            tic = time.perf_counter()
            loss = self._train_epoch_shown(interactive)
            seconds = time.perf_counter() - tic
            self.wall_seconds += seconds
            if loss is None:  # the time limit, inside the epoch: its progress goes to last.pt
                self.stopped_by = "time_limit"
                if self.dist.is_main:
                    self._save_epoch(None)
                break
            if not math.isfinite(loss):
                kept = f"{self.out_dir / 'last.pt'} keeps epoch {self.epoch}" if self.epoch else "nothing was saved"
                raise TrainingError(
                    f"the loss became {loss} in epoch {self.epoch + 1}; stopped without saving it ({kept}); "
                    f"try a lower --lr or a --grad-clip"
                )
            self.epoch += 1
            self.log.epoch(self.epoch, loss, self.epoch_lr, seconds, self.wall_seconds)
            new_best = None
            validated = self.epoch % cfg.eval_every == 0 or self.epoch == cfg.epochs or self._out_of_time()
            if validated:
                new_best = self._validate(bar)
            bar.set_postfix(self._progress_figures(loss), refresh=False)
            bar.update(1)
            if show and not interactive:
                tqdm.write(self._epoch_line(loss, seconds, start_time), file=sys.stderr)
            if self.dist.is_main:
                self._save_epoch(new_best)
            if validated and self.on_validation is not None:
                self.on_validation(self.epoch, self.validation_mrr)
        bar.close()
        if self.epoch < cfg.epochs and self._out_of_time():
            self.stopped_by = "time_limit"
        if show and self.stopped_by is not None:
            tqdm.write(self._stop_line(), file=sys.stderr)
        return self._finish(time.perf_counter() - start_time)

    def _train_epoch_shown(self, interactive: bool) -> Optional[float]:
        """:meth:`train_epoch` with a progress bar over its steps on a terminal (``interactive``),
        and the line of :meth:`_epoch_time_line` after the first steps of a session."""
        steps = self.queries.num_batches(self.config.batch_size)
        first = 0 if self.epoch_progress is None else self.epoch_progress["step"]
        bar = tqdm(total=steps, initial=first, desc=f"epoch {self.epoch + 1}", unit="step", leave=False,
                   disable=not interactive)  # fmt: skip
        clock = [time.perf_counter()]  # before the first step, then after each, while estimating

        def on_step() -> None:
            bar.update(1)
            if self._estimate_epoch_time:
                clock.append(time.perf_counter())
                if len(clock) == min(4, steps - first + 1):
                    self._estimate_epoch_time = False
                    tqdm.write(self._epoch_time_line(clock, steps), file=sys.stderr)

        try:
            return self.train_epoch(on_step)
        finally:
            bar.close()

    def _stop_line(self) -> str:
        """The line that says the time limit ended the run, and where."""
        within = ""
        if self.epoch_progress is not None:
            steps = self.queries.num_batches(self.config.batch_size)
            within = f" and {self.epoch_progress['step']} of {steps} steps of epoch {self.epoch + 1}"
        return (
            f"stopped by --time-limit after {self.epoch} of {self.config.epochs} epochs{within} "
            f"(saved in {self.out_dir / 'last.pt'}; --resume with a larger limit continues it)"
        )

    def _epoch_time_line(self, step_times: List[float], steps: int) -> str:
        """The line on the time of an epoch of ``steps`` steps, estimated from the clock
        readings ``step_times`` (before the first step, then after each); the first step,
        which warms up, is left out where there are more."""
        timed = step_times[1:] if len(step_times) > 2 else step_times
        per_step = (timed[-1] - timed[0]) / (len(timed) - 1)
        seconds = per_step * steps
        line = f"one epoch: about {_duration(seconds)} ({steps:,} steps of {per_step:.2f} s)"
        if seconds <= 300:
            return line
        if self.config.recipe != "large":
            hint = "--recipe large (sampled candidates, 80 epochs) suits graphs of CoDEx-M's size and larger"
        else:
            hint = "fewer --hidden-channels or --num-layers shorten it"
        return f"{line}; {hint} (docs/data.md: which recipe suits which graph size)"

    def _epoch_line(self, loss: float, seconds: float, start_time: float) -> str:
        """The line of an epoch where no progress bar is shown: its loss, time and the run's ETA."""
        done_now = max(self.epoch - self._first_epoch, 1)
        left = (time.perf_counter() - start_time) / done_now * (self.config.epochs - self.epoch)
        figures = self._progress_figures(loss)
        return (
            f"epoch {self.epoch}/{self.config.epochs} | loss {figures['loss']} | best MRR {figures['best_mrr']} | "
            f"{seconds:.1f} s | ETA {_duration(left)}"
        )

    def _banner(self, resume: bool) -> str:
        """The first line of a run: its folder, and for a resumed run the epoch it continues from."""
        if not resume:
            return f"training into {self.out_dir} (epochs 1 to {self.config.epochs})"
        best = self.best["epoch"]
        best_text = (
            f"best validation MRR {self.best['mrr']:.4f} at epoch {best}" if best is not None else "not validated yet"
        )
        left = self.config.epochs - self.epoch
        plan = f"epochs {self.epoch + 1} to {self.config.epochs}" if left > 0 else "no epoch left to train"
        return f"resuming the run in {self.out_dir} after epoch {self.epoch} ({plan}; {best_text})"

    def _progress_figures(self, loss: float) -> Dict[str, str]:
        """The progress bar's figures after an epoch: its loss and the best validation MRR so
        far, the largest ``both.mrr`` of the log's evaluations (none before the first)."""
        best = f"{self.best['mrr']:.4f}" if self.best["epoch"] is not None else "-"
        return {"loss": f"{loss:.4f}", "best_mrr": best}

    def _out_of_time(self, running: float = 0.0) -> bool:
        """Whether the run's training and validation time, with ``running`` seconds of the epoch in
        progress, has passed ``time_limit`` minutes."""
        limit = self.config.time_limit
        return limit is not None and self.wall_seconds + running >= 60.0 * limit

    def _should_stop(self) -> bool:
        patience = self.config.patience
        return patience is not None and self.best["evaluations_since"] >= patience

    def _save_epoch(self, new_best: Optional[Dict[str, float]]) -> None:
        """Writes ``last.pt``, then ``best.pt`` when this epoch is the new best
        (``new_best``: its validation metrics). Until ``best.pt`` is written,
        ``last.pt`` carries the new best weights (see
        :func:`~torch_wge.training.run_folder.repair_best`)."""
        state = self.state()
        evaluated = state["model"] if self.ema is None else state["ema"]
        if new_best is not None:
            state.update(best_model=evaluated, best_valid=new_best)
        save_checkpoint(state, self.out_dir / "last.pt")
        if new_best is not None:
            save_checkpoint(self.best_state(evaluated, self.epoch, new_best), self.out_dir / "best.pt")

    def _validate(self, bar) -> Optional[Dict[str, float]]:
        """Ranks the validation split and updates the best so far; returns
        the flat metrics when this epoch is the new best, else ``None``."""
        tic = time.perf_counter()
        results = self.evaluate("valid")
        trained = None if self.ema is None else self.evaluate("valid", trained=True)
        seconds = time.perf_counter() - tic
        self.wall_seconds += seconds
        mrr = self.validation_mrr = results["both.mrr"]
        improved = mrr > self.best["mrr"]
        if improved:
            self.best = {"epoch": self.epoch, "mrr": mrr, "evaluations_since": 0}
        else:
            self.best["evaluations_since"] += 1
        self.log.validation(
            self.epoch,
            seconds,
            self.wall_seconds,
            results.to_flat_dict(),
            None if trained is None else trained.to_flat_dict(),
        )
        if self.dist.is_main:
            bar.write(
                f"epoch {self.epoch:5d} | valid {results.summary_line()} | {seconds:.2f}s"
                + ("" if trained is None else f" | trained weights MRR {trained['both.mrr']:.4f}")
                + (" | best" if improved else "")
            )
        return results.to_flat_dict() if improved else None

    def _read_model(self, path: Path, map_location="cpu") -> Dict[str, Any]:
        """A ``best.pt`` of this run: checked, of this run's data."""
        return validation.run_checkpoint(path, self.config, self.graph, self.train_triples, map_location)

    def _read_best(self, path: Path, map_location) -> Optional[Dict[str, Any]]:
        """The weights in ``best.pt``, checked to be of the best epoch (``None`` before any validation)."""
        if self.best["epoch"] is None:
            return None
        state = self._read_model(path, map_location)
        if state["epoch"] != self.best["epoch"]:
            raise CheckpointError(f"{path} holds epoch {state['epoch']}, not the best epoch {self.best['epoch']}")
        return state["model"]

    def _finish(self, seconds: float) -> Dict[str, Any]:
        best_path = self.out_dir / "best.pt"
        map_location = "cpu" if self.dist.enabled else self.device
        best = self.dist.on_main(lambda: self._read_best(best_path, map_location))
        if best is not None:
            validation.load_weights(self.evaluated_model, best, best_path)
        valid = self.evaluate("valid")
        test = self.evaluate("test") if self.rank_test else None
        record = {
            "config": self.config.to_dict(),
            "graph": self.graph,
            "epochs_trained": self.epoch,
            "epochs": self.config.epochs,
            "stopped_by": self.stopped_by,
            "best_epoch": self.best["epoch"],
            "valid": valid.to_dict(),
            "test": None if test is None else test.to_dict(),
            "unseen": {"policy": self.config.unseen, "ranked": self.unseen_ranked},
            "wall_seconds": self.wall_seconds,
            "wall_seconds_this_session": seconds,
            "device": str(self.device),
            "world_size": self.dist.world_size,
            "backend": self.dist.backend,
            "threads": torch.get_num_threads(),
            "versions": {"torch_wge": __version__, "torch": torch.__version__},
        }
        if self.dist.is_main:
            io.write_json(self.out_dir / "results.json", record)
        self.log.final(self.best["epoch"], valid.to_flat_dict(), None if test is None else test.to_flat_dict())
        return record
