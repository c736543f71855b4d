r"""A hyperparameter search of WGE runs on Optuna: ``torch-wge tune``.

Each trial draws settings from a search space (:mod:`torch_wge.tune.space`)
over fixed base settings and trains a normal run in ``<out>/trials/<number>/``
with the :class:`~torch_wge.training.Trainer` that ``torch-wge train`` uses;
its value is the filtered validation MRR of its best checkpoint. Every
validation reports its MRR to Optuna, so that a pruner stops a poor trial
after that epoch (its run folder then ends there and the trial is recorded as
pruned).

With ``seeds`` :math:`S > 1` a trial trains its settings :math:`S` times, with
the training seeds :math:`s_0, \dots, s_0 + S - 1` (:math:`s_0` the base
settings' seed), one run folder each, ``<out>/trials/<number>/seed-<s>/``, one
after the other, and its value is the mean of their validation MRRs
:math:`\frac{1}{S} \sum_s \mathrm{MRR}_s`: a choice between settings whose
difference is smaller than the spread between seeds is then made on the mean,
not on one seed's luck. Only the first seed's validations are reported to the
pruner.

The study lives in an Optuna database storage (by default the SQLite file
``<out>/study.db``; a PostgreSQL or MySQL URL serves workers on several
machines). Running the same command again continues it, and so does the same
command in several processes at once: each worker counts the trials that
finished (complete, pruned, or failed by their own settings) and those
running, and starts another until ``trials`` are reached or its
``time_limit`` has passed. A worker keeps a heartbeat for its running trial;
a trial whose worker was killed goes stale after two heartbeat intervals, is
marked failed by the next worker that looks, and its settings are queued to
run again as a new trial, which continues the killed trial's run from its last
checkpoint (its run folder becomes the new trial's) and keeps the validation
MRRs it reported: a trial longer than a worker's session loses at most the
epoch in progress. Each trial records the folder it runs in (its user attributes ``folder`` and
``host``): workers on one storage may each have their own ``out``, and the closing line of a worker
names the folder of the best trial wherever it ran (:func:`best_checkpoint`).
"""

import contextlib
import itertools
import json
import math
import os
import socket
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import optuna
import sqlalchemy.exc
from optuna.trial import FrozenTrial, TrialState

from torch_wge import io
from torch_wge.training import Trainer, load_data
from torch_wge.training.checkpoint import vocabulary_digest
from torch_wge.training.config import TrainConfig
from torch_wge.training.trainer import TrainingError
from torch_wge.tune.space import suggest

PathLike = Union[str, Path]

#: The part of a trial's epochs in which the median pruner prunes nothing. Under the fast
#: recipe's cosine schedule the order of trials changes until late: in a CoDEx-S study the trial
#: that ended best (validation MRR 0.471) was below the median of the five complete trials at
#: 60 % and 70 % of its 500 epochs, above it from 80 %.
MEDIAN_WARMUP = 0.75

#: The pruners of ``--pruner``: each makes a fresh :class:`optuna.pruners.BasePruner` for trials
#: of the given number of epochs.
PRUNERS: Dict[str, Callable[[int], optuna.pruners.BasePruner]] = {
    "median": lambda epochs: optuna.pruners.MedianPruner(
        n_startup_trials=5, n_warmup_steps=int(MEDIAN_WARMUP * epochs)
    ),
    "hyperband": lambda epochs: optuna.pruners.HyperbandPruner(),
    "none": lambda epochs: optuna.pruners.NopPruner(),
}

#: How many times a trial killed with its worker continues in a new trial before it is given up
#: (a trial whose settings kill their worker, say by exhausting memory, is not retried forever).
RETRIES = 5

#: The file of a tune folder naming its study and storage (what ``torch-wge plot`` reads).
STUDY_FILE = "study.json"

#: The file of a tune folder holding the best trial's settings, for ``torch-wge train --config``.
BEST_FILE = "best.json"

#: Trials shown in the closing table.
TABLE_ROWS = 5


class TrialFailed(Exception):
    """A trial that failed by its own settings (a diverged loss, a refused
    combination): recorded as failed, and the study goes on."""


@contextlib.contextmanager
def optuna_errors_only() -> Iterator[None]:
    """Optuna's own log limited to errors: the lines of the study are ours."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def default_storage(out: PathLike) -> str:
    """The URL of the SQLite file ``<out>/study.db``."""
    return f"sqlite:///{(Path(out) / 'study.db').resolve()}"


def open_study(
    name: str,
    storage: str,
    pruner: optuna.pruners.BasePruner,
    heartbeat: int = 60,
    echo: Callable[[str], None] = print,
) -> optuna.Study:
    """The study ``name`` in the database ``storage`` (an SQLAlchemy URL),
    created if absent, maximising; trials whose worker stopped beating for
    ``2 * heartbeat`` seconds are marked failed and run again (said through ``echo``)."""

    def rerun_stale(study: optuna.Study, trial: FrozenTrial) -> None:
        retries = len(trial.system_attrs.get("retry_history", []))
        then = (
            "its settings are queued to continue as a new trial"
            if retries < RETRIES
            else f"given up after {RETRIES} retries"
        )
        echo(
            f"trial {trial.number} was left running by a worker that stopped (no heartbeat for "
            f"{2 * heartbeat}s): marked failed; {then}"
        )
        optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=RETRIES, inherit_intermediate_values=True)(
            study, trial
        )

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            rdb = optuna.storages.RDBStorage(
                storage,
                heartbeat_interval=heartbeat,
                grace_period=2 * heartbeat,
                heartbeat_stale_trial_callback=rerun_stale,
            )
        return optuna.create_study(
            study_name=name, storage=rdb, direction="maximize", pruner=pruner, load_if_exists=True
        )
    except (ImportError, sqlalchemy.exc.SQLAlchemyError) as error:
        reason = " ".join(str(error).split())[:200]
        raise ValueError(f"--storage {storage}: cannot open the database ({reason})") from None


def counts_toward_total(trial: FrozenTrial) -> bool:
    """Whether ``trial`` is one of the study's finished trials: complete,
    pruned, or failed by its settings (not by a killed worker, whose settings run again)."""
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
        trial.state == TrialState.FAIL and "error" in trial.user_attrs
    )


def worker_seed(seed: int, worker: int) -> int:
    """The sampler's seed for the worker numbered ``worker`` (0 for the first to open the study)
    of a study seeded with ``seed``: each worker, and the same command run again, draws its own
    sequence, while one worker's draws are what one seeded sampler draws."""
    return int(np.random.SeedSequence([seed, worker]).generate_state(1)[0])


def format_trial(trial: FrozenTrial) -> str:
    """One line for a finished trial: number, state, value, minutes, settings."""
    minutes = trial.duration.total_seconds() / 60 if trial.duration is not None else math.nan
    if trial.state == TrialState.COMPLETE:
        outcome = f"validation MRR {trial.value:.4f}"
        if "seed_mrrs" in trial.user_attrs:
            by_seed = trial.user_attrs["seed_mrrs"]
            outcome += f" (mean of seeds {', '.join(by_seed)}: {' / '.join(f'{v:.4f}' for v in by_seed.values())})"
    elif trial.state == TrialState.PRUNED and trial.intermediate_values:
        epoch = max(trial.intermediate_values)
        outcome = f"pruned at epoch {epoch} (validation MRR {trial.intermediate_values[epoch]:.4f})"
    else:
        outcome = trial.user_attrs.get("error", trial.state.name.lower())
    if "repeats" in trial.user_attrs:
        outcome += f" (the settings of trial {trial.user_attrs['repeats']}: not trained again)"
    settings = " ".join(f"{key}={_short(value)}" for key, value in trial.params.items())
    return f"trial {trial.number} | {trial.state.name.lower()} | {outcome} | {minutes:.1f} min | {settings}"


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _mrr(trial: FrozenTrial) -> float:
    """A complete trial's validation MRR (Optuna types a trial's value as optional)."""
    assert trial.value is not None, f"trial {trial.number} has no value"
    return trial.value


def _valid_mrr(results: Any) -> Optional[float]:
    """The validation MRR of a run's ``results.json`` content, or :obj:`None` when it holds none."""
    try:
        mrr = results["valid"]["metrics"]["both"]["mrr"]
    except (KeyError, TypeError, IndexError):
        return None
    return float(mrr) if isinstance(mrr, (int, float)) and not isinstance(mrr, bool) and 0 <= mrr <= 1 else None


def read_run_mrr(folder: Path) -> float:
    """The validation MRR a finished run recorded in its ``results.json`` (read by
    :func:`torch_wge.io.read_document`).

    Raises:
        ValueError: naming the file when it cannot be read or holds no validation MRR in [0, 1].
    """
    path = folder / "results.json"
    try:
        mrr = _valid_mrr(io.read_document(path, "json"))
    except io.UnreadableFileError as error:
        raise ValueError(f"{error}; remove it to train the run again") from None
    if mrr is None:
        raise ValueError(
            f"{path}: holds no validation MRR in [0, 1] (valid.metrics.both.mrr): not a finished run's results; "
            f"remove it to train the run again"
        )
    return mrr


def _minutes(trial: FrozenTrial) -> float:
    """A finished trial's duration in minutes."""
    assert trial.duration is not None, f"trial {trial.number} has not finished"
    return trial.duration.total_seconds() / 60


def best_table(study: optuna.Study, rows: int = TABLE_ROWS) -> str:
    """The study's counts of trials by state and its ``rows`` best complete trials as a table."""
    trials = study.get_trials(deepcopy=False)
    states = [TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING]
    counts = ", ".join(f"{sum(t.state == s for t in trials)} {s.name.lower()}" for s in states)
    lines = [f"study {study.study_name}: {len(trials)} trials ({counts})"]
    complete = sorted((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: -_mrr(t))[:rows]
    if complete:
        names = list(complete[0].params)
        header = ["trial", "valid MRR", "minutes", *names]
        body = [
            [str(t.number), f"{_mrr(t):.4f}", f"{_minutes(t):.1f}"] + [_short(t.params.get(name)) for name in names]
            for t in complete
        ]
        widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
        lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in [header, *body]]
    return "\n".join(lines)


#: Base settings a worker may give otherwise than the study's first: where it reads and computes.
WORKER_SETTINGS = ("root", "device")


def _check_same_search(study: optuna.Study, search: Dict[str, Any], storage: str) -> None:
    """Records ``search`` (the space, the base settings but :data:`WORKER_SETTINGS`, and the
    seeds of a trial when more than one) in a new study; refuses another one for a study that
    recorded its own."""
    search = {**search, "base": {k: v for k, v in search["base"].items() if k not in WORKER_SETTINGS}}
    stored = study.user_attrs.get("search")
    if stored is None:
        study.set_user_attr("search", search)
    elif json.dumps(stored, sort_keys=True) != json.dumps(search, sort_keys=True):
        changed = sorted(
            key
            for part in ("space", "base")
            for key in set(stored[part]) | set(search[part])
            if stored[part].get(key) != search[part].get(key)
        ) + (["seeds"] if stored.get("seeds", 1) != search.get("seeds", 1) else [])
        raise ValueError(
            f"study {study.study_name!r} in {storage} was started with another search space or settings "
            f"(differing: {', '.join(changed)}); give the same ones, or another --study"
        )


def tune(
    base: Mapping[str, Any],
    space: Mapping[str, Mapping[str, Any]],
    out: PathLike,
    trials: Optional[int] = None,
    time_limit: Optional[float] = None,
    study_name: str = "wge",
    storage: Optional[str] = None,
    pruner: Union[str, optuna.pruners.BasePruner] = "median",
    seed: int = 0,
    heartbeat: int = 60,
    progress: bool = True,
    echo: Callable[[str], None] = print,
    enqueue: Sequence[Mapping[str, Any]] = (),
    seeds: int = 1,
) -> optuna.Study:
    r"""Runs (or continues) a study until it holds ``trials`` finished trials
    or this worker's ``time_limit`` has passed, whichever comes first
    (checked between trials), and returns it.

    The space searches only settings ``base`` leaves out: a setting every
    trial shares is never searched (one in both is refused).

    A space of categorical settings only is a grid: each trial takes the first
    combination no trial has drawn (after the queued ones), and the study ends
    once every combination has been tried. Any other space is drawn by the
    study's sampler, one :class:`optuna.samplers.TPESampler` per worker
    (see ``seed``).

    A trial that draws the searched settings of an earlier complete or pruned
    trial (a small space runs out of new combinations) is not trained again:
    it takes that trial's validation MRR, or is pruned as it was.

    Every finished trial is one line through ``echo`` (number, state,
    validation MRR, minutes, settings), and ``<out>/best.json`` is rewritten
    with the best trial's full settings; at the end a table of the best trials.

    Args:
        base (dict): Settings of every trial (:class:`TrainConfig` fields), none of them searched.
        space (dict): The search space (see :mod:`torch_wge.tune.space`), checked.
        out (str or Path): The tune folder: ``trials/<number>/`` run folders,
            ``study.db`` (the default storage), ``study.json``, ``best.json``.
        trials (int, optional): Finished trials to reach. (default: :obj:`None`)
        time_limit (float, optional): Minutes after which this worker starts
            no new trial. (default: :obj:`None`; one of the two is needed)
        study_name (str, optional): The study's name in the storage. (default: ``"wge"``)
        storage (str, optional): An SQLAlchemy database URL.
            (default: ``sqlite:///<out>/study.db``)
        pruner (str or BasePruner, optional): A name of :data:`PRUNERS` or a
            pruner; ``"median"`` prunes nothing in the first
            :data:`MEDIAN_WARMUP` of the base settings' epochs.
            (default: ``"median"``)
        seed (int, optional): Seed of the sampler: worker :math:`w` (numbered in
            the order the workers open the study, a run of the same command again
            being the next) draws with a :class:`~optuna.samplers.TPESampler` seeded
            once by :func:`worker_seed` of ``seed`` and :math:`w`. (default: :obj:`0`)
        heartbeat (int, optional): Seconds between a running trial's heartbeats. (default: :obj:`60`)
        progress (bool, optional): Show each trial's progress bars. (default: :obj:`True`)
        echo (callable, optional): Where the lines go. (default: :func:`print`)
        enqueue (list of dict, optional): Settings of the space to try before
            the sampler's own (:func:`~torch_wge.tune.space.fixed_params`), such
            as a recipe's or another study's best; each is queued once per study,
            so the same command again queues nothing new. (default: :obj:`()`)
        seeds (int, optional): Runs of each trial's settings, with the base
            settings' seed and the next ones; the trial's value is their mean
            validation MRR (see above). A study keeps the number it started
            with. (default: :obj:`1`)
    """
    if trials is None and time_limit is None:
        raise ValueError("give a number of trials or a time limit (or both)")
    worker = Worker(base, space, out, seed=seed, progress=progress, echo=echo, seeds=seeds)
    worker.open(study_name, storage, pruner, heartbeat, enqueue)
    return worker.run(trials, time_limit)


class Worker:
    r"""One worker of a study of :func:`tune`: it opens the study (:meth:`open`), then draws and
    trains trials (:meth:`run`), each in its run folder (:meth:`objective`).

    Args:
        base, space, out, seed, progress, echo, seeds: As for :func:`tune`.
    """

    def __init__(
        self,
        base: Mapping[str, Any],
        space: Mapping[str, Mapping[str, Any]],
        out: PathLike,
        seed: int = 0,
        progress: bool = True,
        echo: Callable[[str], None] = print,
        seeds: int = 1,
    ):
        if seeds < 1:
            raise ValueError(f"seeds must be at least 1, got {seeds}")
        shared = sorted(set(space) & set(base))
        if shared:
            raise ValueError(
                f"{', '.join(shared)}: in both the shared settings and the search space; a setting is shared "
                f"by every trial or searched, not both"
            )
        self.base, self.space, self.out = dict(base), dict(space), Path(out)
        self.seed, self.progress, self.echo, self.seeds = seed, progress, echo, seeds
        self.study: Optional[optuna.Study] = None

    def open(
        self,
        study_name: str = "wge",
        storage: Optional[str] = None,
        pruner: Union[str, optuna.pruners.BasePruner] = "median",
        heartbeat: int = 60,
        enqueue: Sequence[Mapping[str, Any]] = (),
    ) -> optuna.Study:
        """Opens (or creates) the study, checks that it searches this space over these settings,
        takes this worker's number and sampler, writes ``study.json`` and queues ``enqueue``."""
        self.out.mkdir(parents=True, exist_ok=True)
        storage = storage or default_storage(self.out)
        search = {"space": self.space, "base": self.base, **({"seeds": self.seeds} if self.seeds > 1 else {})}
        epochs = TrainConfig.from_dict(dict(self.base)).epochs  # of the base settings
        with optuna_errors_only(), io.FolderLock(self.out, wait=True):  # workers starting together: in turn
            study = open_study(
                study_name,
                storage,
                PRUNERS[pruner](epochs) if isinstance(pruner, str) else pruner,
                heartbeat,
                self.echo,
            )
            _check_same_search(study, search, storage)
            worker = study.user_attrs.get("workers", 0)
            study.set_user_attr("workers", worker + 1)
            study.sampler = optuna.samplers.TPESampler(seed=worker_seed(self.seed, worker), constant_liar=True)
            io.write_json(self.out / STUDY_FILE, {"study": study_name, "storage": storage})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # skip_if_exists
                for params in enqueue:
                    study.enqueue_trial(dict(params), skip_if_exists=True)
        self.study = study
        return study

    def _opened(self) -> optuna.Study:
        if self.study is None:
            raise RuntimeError("open the study first (Worker.open)")
        return self.study

    def run(self, trials: Optional[int] = None, time_limit: Optional[float] = None) -> optuna.Study:
        """Draws and trains trials until the study holds ``trials`` finished ones, this worker's
        ``time_limit`` (minutes) has passed, or a grid has been tried; writes ``best.json`` and
        the closing table."""
        study = self._opened()
        grid = combinations(self.space)
        started = time.monotonic()
        with optuna_errors_only():
            while True:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    optuna.storages.fail_stale_trials(study)
                all_trials = study.get_trials(deepcopy=False)
                taken = sum(counts_toward_total(t) or t.state == TrialState.RUNNING for t in all_trials)
                if trials is not None and taken >= trials:
                    break
                if time_limit is not None and time.monotonic() - started >= 60 * time_limit:
                    break
                if grid is not None and not any(t.state == TrialState.WAITING for t in all_trials):
                    drawn = [t.params for t in all_trials if t.state != TrialState.FAIL or "error" in t.user_attrs]
                    untried = [combination for combination in grid if combination not in drawn]
                    if not untried:
                        self.echo(f"every one of the space's {len(grid)} combinations has been tried")
                        break
                    study.enqueue_trial(untried[0])
                study.optimize(self.objective, n_trials=1, catch=(TrialFailed,), callbacks=[self.finished])
        write_best(study, self.out)
        self.echo(best_table(study))
        return study

    def finished(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """A trial ended: its line, and ``best.json`` rewritten."""
        self.echo(format_trial(trial))
        write_best(study, self.out)

    def objective(self, trial: optuna.Trial) -> float:
        """The value of ``trial``: the validation MRR of its settings (the mean over its seeds),
        trained in ``trials/<number>/``, or an earlier trial's of the same settings."""
        study = self._opened()
        config = TrainConfig.from_dict({**self.base, **suggest(trial, self.space)})
        trial.set_user_attr("config", config.to_dict())
        try:
            config.validate()
        except ValueError as error:
            trial.set_user_attr("error", f"refused settings: {error}")
            raise TrialFailed(error) from None
        earlier = earlier_same_settings(study, trial)
        if earlier is not None:  # drawn again (a small space's sampler does): not trained twice
            trial.set_user_attr("repeats", earlier.number)
            if earlier.state == TrialState.PRUNED:
                raise optuna.TrialPruned(f"as trial {earlier.number}")
            return _mrr(earlier)
        dataset, data = load_data(config, log=self.progress)
        training = (data, vocabulary_digest(dataset.entity_names, dataset.relation_names))
        folder = self.out / "trials" / str(trial.number)
        killed = take_over_killed_run(study.get_trials(deepcopy=False)[trial.number], self.out / "trials")
        if killed is not None:
            self.echo(f"trial {trial.number} continues the run of killed trial {killed} from its last checkpoint")
        # where the trial runs: workers on one storage may each have their own --out (and machine)
        trial.set_user_attr("folder", os.path.abspath(folder))
        trial.set_user_attr("host", socket.gethostname())
        runs = seed_runs(config, folder, self.seeds)
        if self.seeds == 1:  # the run locks its folder itself
            return self.validation_mrr(trial, *runs[0], training, first=True)
        folder.mkdir(parents=True, exist_ok=True)
        lock = io.FolderLock(folder)  # the trial's folder, so that no other worker takes it over
        if not lock.acquire():
            raise RuntimeError(f"{folder}: the folder of trial {trial.number} is held by another worker")
        try:
            mrrs = [
                self.validation_mrr(trial, run_config, path, training, i == 0)
                for i, (run_config, path) in enumerate(runs)
            ]
        finally:
            lock.release()
        trial.set_user_attr("seed_mrrs", {str(run_config.seed): mrr for (run_config, _), mrr in zip(runs, mrrs)})
        return statistics.fmean(mrrs)

    def validation_mrr(
        self, trial: optuna.Trial, config: TrainConfig, folder: Path, training: Tuple[Any, str], first: bool
    ) -> float:
        """The validation MRR of the run of ``config`` in ``folder``: read from its results once it
        finished (:func:`read_run_mrr`), else trained on ``training`` (the graph and its
        vocabulary's digest), on from its last checkpoint where a killed trial left one. The
        ``first`` run of a trial reports its validations to the pruner."""
        if (folder / "results.json").exists():
            return read_run_mrr(folder)
        data, vocabulary = training

        def report(epoch: int, mrr: float) -> None:
            trial.report(mrr, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at epoch {epoch}")

        trainer = Trainer(
            config,
            data,
            folder,
            progress=self.progress,
            vocabulary=vocabulary,
            on_validation=report if first else None,
            rank_test=False,
        )
        try:
            result = trainer.fit(resume=(folder / "last.pt").is_file())
        except TrainingError as error:
            trial.set_user_attr("error", str(error).split(";")[0])
            raise TrialFailed(error) from None
        mrr = _valid_mrr(result)
        assert mrr is not None, "a finished run has a validation MRR"
        return mrr


def combinations(space: Mapping[str, Mapping[str, Any]]) -> Optional[List[Dict[str, Any]]]:
    """Every combination of a space whose settings are all categorical, in the order of their
    choices (the last setting varying fastest); :obj:`None` for any other space.

    Example:
        >>> combinations({"num_layers": {"type": "categorical", "choices": [1, 2]},
        ...               "alpha0": {"type": "categorical", "choices": [0.3, 0.9]}})
        [{'num_layers': 1, 'alpha0': 0.3}, {'num_layers': 1, 'alpha0': 0.9}, {'num_layers': 2, 'alpha0': 0.3}, {'num_layers': 2, 'alpha0': 0.9}]
    """
    if not all(spec["type"] == "categorical" for spec in space.values()):
        return None
    names = list(space)
    return [dict(zip(names, values)) for values in itertools.product(*(space[name]["choices"] for name in names))]


def earlier_same_settings(study: optuna.Study, trial: optuna.Trial) -> Optional[FrozenTrial]:
    """A complete or pruned trial of ``study`` that drew every searched setting as ``trial`` did, or
    :obj:`None`. The sampler draws a combination again once a small space has few left."""
    for other in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        if other.number != trial.number and other.params == trial.params:
            return other
    return None


def run_folder(trial_folder: Path, seed: int, seeds: int) -> Path:
    """The run folder of training seed ``seed`` in the folder of a trial of ``seeds`` runs: the
    trial's folder itself for one run, else its ``seed-<seed>``."""
    return trial_folder if seeds == 1 else trial_folder / f"seed-{seed}"


def seed_runs(config: TrainConfig, trial_folder: Path, seeds: int) -> List[Tuple[TrainConfig, Path]]:
    """The runs of a trial of ``config``: ``config`` with each of the training seeds ``config.seed``,
    ..., ``config.seed + seeds - 1``, and its :func:`run_folder`."""
    return [
        (TrainConfig.from_dict({**config.to_dict(), "seed": seed}), run_folder(trial_folder, seed, seeds))
        for seed in range(config.seed, config.seed + seeds)
    ]


def trained_trial(study: optuna.Study, trial: FrozenTrial) -> FrozenTrial:
    """The trial that trained the settings of ``trial``: ``trial`` itself, or the earlier trial of
    the same settings whose value it took (``repeats``, see :func:`earlier_same_settings`)."""
    trials = study.get_trials(deepcopy=False)
    seen = set()
    while isinstance(trial.user_attrs.get("repeats"), int) and trial.number not in seen:
        seen.add(trial.number)
        trial = trials[trial.user_attrs["repeats"]]
    return trial


def best_checkpoint(study: optuna.Study, out: PathLike, seed: int, seeds: int) -> Tuple[Path, str]:
    """The ``best.pt`` of the first training seed ``seed`` of the study's best trial (of the trial
    that trained its settings, :func:`trained_trial`), and a note on where it lies: ``""`` when it
    lies in this worker's tune folder ``out``, else which worker's folder or machine holds it.
    Each trial records the folder it ran in (the user attributes ``folder`` and ``host``): workers
    on one storage may each have their own ``--out``, and a trial's run folder is that of the
    worker that ran it."""
    trial = trained_trial(study, study.best_trial)
    number, here = trial.number, Path(out)
    recorded, host = trial.user_attrs.get("folder"), trial.user_attrs.get("host")
    if not isinstance(recorded, str):  # a trial of a study begun before trials recorded their folder
        folder = here / "trials" / str(number)
        note = "" if folder.is_dir() else f" (trial {number} ran in the --out of another worker: trials/{number} there)"
        return run_folder(folder, seed, seeds) / "best.pt", note
    mine = Path(os.path.abspath(here))
    ran = Path(recorded)
    if host in (None, socket.gethostname()) and ran.is_relative_to(mine):
        return run_folder(here / ran.relative_to(mine), seed, seeds) / "best.pt", ""
    where = "" if host in (None, socket.gethostname()) else f" on {host}"
    return run_folder(ran, seed, seeds) / "best.pt", f" (trial {number} ran in the --out of another worker{where})"


def take_over_killed_run(trial: FrozenTrial, trials: Path) -> Optional[int]:
    """When ``trial`` continues a killed trial (queued by the heartbeat's retry) whose run folder in
    ``trials`` holds a checkpoint (its own, or one of its seeds' runs) and is written by no process,
    moves that folder to ``trials/<trial.number>`` (one rename) and returns the killed trial's number;
    else :obj:`None`, and the trial starts afresh."""
    history = trial.system_attrs.get("retry_history", [])
    if not history:
        return None
    killed, folder = trials / str(history[-1]), trials / str(trial.number)
    checkpoints = [killed / "last.pt", *killed.glob("seed-*/last.pt")]
    if not any(path.is_file() for path in checkpoints) or folder.exists():
        return None
    lock = io.FolderLock(killed)
    if not lock.acquire():  # its worker still writes there
        return None
    try:
        os.replace(killed, folder)
    finally:
        lock.release()
    return history[-1]


def write_best(study: optuna.Study, out: PathLike) -> Optional[Dict[str, Any]]:
    """Writes the full settings of the study's best complete trial to
    ``<out>/best.json`` (atomically) and returns them; :obj:`None` before any
    trial completed."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    best = max(complete, key=_mrr)
    config = best.user_attrs["config"]
    io.write_json(Path(out) / BEST_FILE, config)
    return config


def read_study_file(folder: PathLike) -> Dict[str, str]:
    """The study name and storage a tune folder's ``study.json`` names (read by
    :func:`torch_wge.io.read_document`)."""
    path = Path(folder) / STUDY_FILE
    try:
        values = io.read_document(path, "json")
    except (io.UnreadableFileError, OSError) as error:
        reason = f"{error.filename}: {error.strerror}" if isinstance(error, OSError) else str(error)
        raise ValueError(f"{path}: not the study file of a tune folder ({reason})") from None
    if not (
        isinstance(values, dict)
        and isinstance(values.get("study"), str)
        and values["study"].strip()
        and isinstance(values.get("storage"), str)
    ):
        raise ValueError(f'{path}: expected {{"study": NAME, "storage": URL}}')
    return values


def load_study(name: str, storage: str) -> optuna.Study:
    """An existing study, read-only use (for plots).

    Raises:
        ValueError: one line naming the storage, when it cannot be opened or holds no such study.
    """
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise ValueError(f"no study {name!r} in {storage}") from None
    except (ImportError, ValueError, sqlalchemy.exc.SQLAlchemyError) as error:
        reason = " ".join(str(error).split())[:200]
        raise ValueError(f"--storage {storage}: cannot open the database ({reason})") from None
