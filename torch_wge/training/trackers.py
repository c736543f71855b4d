r"""Experiment trackers: where a training run reports its settings, its epochs
and its validations, besides the run folder's ``log.jsonl``.

A tracker is any object with the four methods of :class:`Tracker`;
:class:`~torch_wge.training.Trainer` calls them in its main process only
(rank 0 of a distributed run). :class:`TensorBoardTracker` writes TensorBoard
event files; MLflow, Weights & Biases and the like fit in the same few lines.

A run resumed from the checkpoint of epoch :math:`e` calls :meth:`Tracker.start`
with :math:`e`: whatever an earlier session reported for epochs after
:math:`e` (it was killed before their checkpoint) is to be dropped, so that
every epoch's figures appear once.
"""

import re
import time
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Protocol, Union, runtime_checkable


@runtime_checkable
class Tracker(Protocol):
    """What a training run reports to, in its main process only."""

    def start(self, settings: Dict[str, Any], epoch: int) -> None:
        """The run starts (``epoch`` 0) or resumes after the checkpoint of
        ``epoch``; ``settings`` are its :meth:`TrainConfig.to_dict`. What was
        reported for later epochs before is stale."""

    def log_epoch(self, epoch: int, figures: Dict[str, float]) -> None:
        """Epoch ``epoch`` (counted from 1) was trained: ``loss`` (the mean
        batch loss), ``lr`` (its learning rate), ``epoch_seconds`` and
        ``wall_seconds`` (training and validation time of the run so far)."""

    def log_validation(self, epoch: int, metrics: Dict[str, float]) -> None:
        """The validation split was ranked after epoch ``epoch``: filtered
        metrics keyed ``"{side}.{metric}"`` (sides ``both``, ``head``, ``tail``;
        metrics ``mrr``, ``mr``, ``hits@1``, ``hits@3``, ``hits@10``), and with
        weight averaging the trained weights' under ``"trained_weights.{side}.{metric}"``."""

    def close(self) -> None:
        """The run's session ended (finished, stopped or failed)."""


def report(trackers: Iterable[Tracker], record: Dict[str, Any]) -> None:
    """Passes one record of ``log.jsonl`` to ``trackers``: an ``epoch`` record
    to :meth:`Tracker.log_epoch`, a ``valid`` evaluation to
    :meth:`Tracker.log_validation`; other records are the log's only."""
    if record["event"] == "epoch":
        figures = {
            "loss": record["loss"],
            "lr": record["lr"],
            "epoch_seconds": record["seconds"],
            "wall_seconds": record["wall_seconds"],
        }
        for tracker in trackers:
            tracker.log_epoch(record["epoch"], figures)
    elif record["event"] == "eval" and record["split"] == "valid":
        metrics = {key: value for key, value in record.items() if "." in key}
        for key, value in record.get("trained_weights", {}).items():
            metrics[f"trained_weights.{key}"] = value
        for tracker in trackers:
            tracker.log_validation(record["epoch"], metrics)


def hparam_values(settings: Dict[str, Any]) -> Dict[str, Union[bool, int, float, str]]:
    """``settings`` as TensorBoard hyper-parameters: numbers, booleans and
    strings as they are, anything else (``None``) as its text."""
    return {key: value if isinstance(value, (bool, int, float, str)) else str(value) for key, value in settings.items()}


# the validation metrics the hyper-parameter table shows beside each run's settings
HPARAM_METRICS = ("valid/both.mrr", "valid/both.hits@1", "valid/both.hits@10")

_EVENT_FILE = re.compile(r"events\.out\.tfevents\.(\d+)\.")


class TensorBoardTracker:
    r"""Writes a run's curves and settings as TensorBoard event files in
    ``log_dir`` (needs the ``tensorboard`` package: ``pip install 'torch_wge[tensorboard]'``).

    Scalars, at global step = epoch:

    - ``train/loss``, ``train/lr``, ``train/epoch_seconds``, ``train/wall_seconds`` every epoch;
    - ``valid/{side}.{metric}`` at every validation (``valid/both.mrr``,
      ``valid/head.hits@10``, ...), and ``valid_trained_weights/{side}.{metric}``
      with weight averaging.

    The settings a run starts with go to TensorBoard's hyper-parameter
    table (the HParams tab), beside the validation metrics
    :data:`HPARAM_METRICS`, at step 1. A session that resumes after epoch :math:`e`
    writes a new event file that starts by purging the steps after
    :math:`e` (``SummaryWriter(purge_step=e + 1)``), so that TensorBoard
    hides the events of epochs a killed session never checkpointed; the
    figures are flushed after every epoch and validation, so a kill loses
    none of a checkpointed epoch. ``log_dir`` is the run's own: TensorBoard
    takes a run's settings from the first event file that has them, so a
    new run in a folder that holds the event files of another shows that
    one's settings.

    Args:
        log_dir (str or Path): Folder of the event files, one TensorBoard run
            (``torch-wge train`` uses ``<run folder>/tensorboard``).
    """

    def __init__(self, log_dir: Union[str, Path]):
        self.log_dir = Path(log_dir)
        self.writer: Optional[Any] = None

    def start(self, settings: Dict[str, Any], epoch: int) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        self.close()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._wait_for_later_file_name()
        self.writer = SummaryWriter(str(self.log_dir), purge_step=epoch + 1)
        if epoch == 0:  # a new run; a resumed one keeps the settings it started with
            file_writer = self.writer.file_writer  # made by SummaryWriter's constructor
            assert file_writer is not None
            for summary in hparams(hparam_values(settings), {tag: 0.0 for tag in HPARAM_METRICS}):
                file_writer.add_summary(summary, 1)
        self.writer.flush()

    def _wait_for_later_file_name(self) -> None:
        """TensorBoard reads a folder's event files in name order, which starts
        with the second a file was made in; a session that starts in the second
        of the latest file waits for the next, so that its purge follows that file."""
        stamps = [int(m.group(1)) for p in self.log_dir.iterdir() if (m := _EVENT_FILE.match(p.name))]
        while stamps and int(time.time()) <= max(stamps):
            time.sleep(max(0.01, max(stamps) + 1 - time.time()))

    def log_epoch(self, epoch: int, figures: Dict[str, float]) -> None:
        self._scalars("train", epoch, figures)

    def log_validation(self, epoch: int, metrics: Dict[str, float]) -> None:
        own = {key: value for key, value in metrics.items() if not key.startswith("trained_weights.")}
        trained = {key.split(".", 1)[1]: value for key, value in metrics.items() if key not in own}
        self._scalars("valid", epoch, own)
        self._scalars("valid_trained_weights", epoch, trained)

    def _scalars(self, prefix: str, epoch: int, values: Dict[str, float]) -> None:
        if self.writer is None:
            raise RuntimeError("TensorBoardTracker: start() was not called")
        for key, value in values.items():
            self.writer.add_scalar(f"{prefix}/{key}", value, epoch)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package, which :class:`TensorBoardTracker` writes with, is installed."""
    from importlib.util import find_spec

    return find_spec("tensorboard") is not None
