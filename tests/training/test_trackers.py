"""Trackers: TensorBoard's event files, read back with TensorBoard's own reader,
hold every epoch and validation of log.jsonl once, also after a kill and a resume."""

import os
import traceback

import pytest

from torch_wge.cli import main
from torch_wge.testing import random_kg, write_triples_folder
from torch_wge.training import TrainConfig, Trainer
from torch_wge.training import trainer as trainer_module
from torch_wge.training.run_folder import read_log
from torch_wge.training.trackers import TensorBoardTracker, Tracker

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
plugin_data_pb2 = pytest.importorskip("tensorboard.plugins.hparams.plugin_data_pb2")
EventFileLoader = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader").EventFileLoader

CONFIG = dict(
    recipe="paper", dataset="random", epochs=3, hidden_channels=2, batch_size=64, lr=0.01, eval_every=2, seed=3
)


@pytest.fixture(scope="module")
def data(tiny_two_view_kg):
    return tiny_two_view_kg


@pytest.fixture(autouse=True)
def _single_thread(one_torch_thread):
    """One torch thread: deterministic sums, and safe to fork."""


def fit(data, folder, resume=False, **settings):
    config = TrainConfig(**{**CONFIG, **settings})
    tracker = TensorBoardTracker(folder / "tensorboard")
    return Trainer(config, data, folder, progress=False, trackers=[tracker]).fit(resume=resume)


def read_events(folder):
    """TensorBoard's view of ``folder``: ``{tag: [(step, value), ...]}`` and the accumulator."""
    accumulator = event_accumulator.EventAccumulator(str(folder))
    accumulator.Reload()
    scalars = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}
    return scalars, accumulator


def assert_events_match_log(folder):
    """Every epoch and validation record of log.jsonl is in the event files exactly once, with its values."""
    scalars, _ = read_events(folder / "tensorboard")
    log = read_log(folder / "log.jsonl")
    epochs = [r for r in log if r["event"] == "epoch"]
    valids = [r for r in log if r["event"] == "eval"]
    for tag, key in (("loss", "loss"), ("lr", "lr"), ("epoch_seconds", "seconds"), ("wall_seconds", "wall_seconds")):
        assert [step for step, _ in scalars[f"train/{tag}"]] == [r["epoch"] for r in epochs], tag
        assert [value for _, value in scalars[f"train/{tag}"]] == pytest.approx([r[key] for r in epochs], rel=1e-6)
    for key in ("both.mrr", "head.mr", "tail.hits@10", "both.hits@1", "head.hits@3"):
        assert scalars[f"valid/{key}"] == [(r["epoch"], pytest.approx(r[key], rel=1e-6)) for r in valids], key
    return scalars


def test_tensorboard_holds_each_epoch_and_validation_of_the_log(data, tmp_path):
    fit(data, tmp_path)
    scalars = assert_events_match_log(tmp_path)
    assert [step for step, _ in scalars["train/loss"]] == [1, 2, 3]
    assert [step for step, _ in scalars["valid/both.mrr"]] == [2, 3]
    assert len([tag for tag in scalars if tag.startswith("valid/")]) == 15  # 3 sides x 5 metrics
    assert scalars["train/lr"] == [(1, pytest.approx(0.01)), (2, pytest.approx(0.01)), (3, pytest.approx(0.01))]


def test_settings_are_tensorboard_hyper_parameters(data, tmp_path):
    fit(data, tmp_path)
    _, accumulator = read_events(tmp_path / "tensorboard")
    content = accumulator.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hparams = start.session_start_info.hparams
    assert hparams["lr"].number_value == pytest.approx(0.01) and hparams["hidden_channels"].number_value == 2
    assert hparams["recipe"].string_value == "paper" and hparams["patience"].string_value == "None"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert [info.name.tag for info in experiment.metric_infos] == [
        "valid/both.mrr",
        "valid/both.hits@1",
        "valid/both.hits@10",
    ]


def in_child(fn):
    """Runs fn in a forked process; returns its exit status (137: killed, 0: finished)."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_kill_between_the_log_and_the_checkpoint_leaves_no_duplicate_step(data, tmp_path, monkeypatch):
    """The run dies (no clean-up) after logging epoch 3 and its validation, before
    epoch 3's checkpoint; the resume trains epoch 3 again, and TensorBoard shows it once."""
    real_save = trainer_module.save_checkpoint

    def die_before_epoch_3(state, path):
        if str(path).endswith("last.pt") and state["epoch"] == 3:
            os._exit(137)
        real_save(state, path)

    def killed_run():
        monkeypatch.setattr(trainer_module, "save_checkpoint", die_before_epoch_3)
        fit(data, tmp_path)

    assert in_child(killed_run) == 137
    before, _ = read_events(tmp_path / "tensorboard")
    assert [step for step, _ in before["train/loss"]] == [1, 2, 3]  # epoch 3 reached the event file, not last.pt
    assert [step for step, _ in before["valid/both.mrr"]] == [2, 3]

    fit(data, tmp_path, resume=True)
    after = assert_events_match_log(tmp_path)
    assert [step for step, _ in after["train/loss"]] == [1, 2, 3]
    files = sorted((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    tags = [value.tag for path in files for event in EventFileLoader(str(path)).Load() for value in event.summary.value]
    assert tags.count("_hparams_/session_start_info") == 1  # the settings the run started with, once
    assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 2  # one per session


def test_a_stopped_run_resumed_for_more_epochs_continues_the_curves(data, tmp_path):
    fit(data, tmp_path, epochs=2)
    fit(data, tmp_path, resume=True, epochs=5)
    scalars = assert_events_match_log(tmp_path)
    assert [step for step, _ in scalars["train/loss"]] == [1, 2, 3, 4, 5]
    assert [step for step, _ in scalars["valid/both.mrr"]] == [2, 4, 5]


class RecordingTracker:
    """A user-defined tracker: keeps every call."""

    def __init__(self):
        self.calls = []

    def start(self, settings, epoch):
        self.calls.append(("start", settings["epochs"], epoch))

    def log_epoch(self, epoch, figures):
        self.calls.append(("epoch", epoch, figures))

    def log_validation(self, epoch, metrics):
        self.calls.append(("valid", epoch, metrics))

    def close(self):
        self.calls.append(("close",))


def test_a_user_defined_tracker_gets_what_the_log_holds(data, tmp_path):
    tracker = RecordingTracker()
    assert isinstance(tracker, Tracker)
    Trainer(TrainConfig(**{**CONFIG, "epochs": 2}), data, tmp_path, progress=False, trackers=[tracker]).fit()
    resumed = RecordingTracker()
    config = TrainConfig(**{**CONFIG, "epochs": 3})
    Trainer(config, data, tmp_path, progress=False, trackers=[resumed]).fit(resume=True)
    log = read_log(tmp_path / "log.jsonl")
    epoch_1, valid_2 = log[0], log[2]
    assert [call[:2] for call in tracker.calls] == [("start", 2), ("epoch", 1), ("epoch", 2), ("valid", 2), ("close",)]
    assert tracker.calls[0] == ("start", 2, 0)
    assert tracker.calls[1][2] == {
        "loss": epoch_1["loss"],
        "lr": epoch_1["lr"],
        "epoch_seconds": epoch_1["seconds"],
        "wall_seconds": epoch_1["wall_seconds"],
    }
    assert tracker.calls[3][2] == {key: value for key, value in valid_2.items() if "." in key}
    assert len(tracker.calls[3][2]) == 15
    assert [call[:2] for call in resumed.calls] == [("start", 3), ("epoch", 3), ("valid", 3), ("close",)]
    assert resumed.calls[0] == ("start", 3, 2)  # resumes after the checkpoint of epoch 2


def test_weight_averaging_logs_the_trained_weights_beside(data, tmp_path):
    fit(data, tmp_path, ema_decay=0.9)
    scalars, _ = read_events(tmp_path / "tensorboard")
    valids = [r for r in read_log(tmp_path / "log.jsonl") if r["event"] == "eval"]
    trained = [(r["epoch"], pytest.approx(r["trained_weights"]["both.mrr"], rel=1e-6)) for r in valids]
    assert scalars["valid_trained_weights/both.mrr"] == trained
    assert scalars["valid/both.mrr"] == [(r["epoch"], pytest.approx(r["both.mrr"], rel=1e-6)) for r in valids]


def test_train_writes_tensorboard_unless_told_not_to(tmp_path):
    kg = write_triples_folder(random_kg(30, 3, 300, seed=7), tmp_path / "kg")
    common = [
        "train",
        "--dataset",
        str(kg),
        "--root",
        str(tmp_path / "data"),
        "--epochs",
        "2",
        "--hidden-channels",
        "2",
    ]
    assert main([*common, "--out", str(tmp_path / "on"), "--no-progress"]) == 0
    scalars, _ = read_events(tmp_path / "on" / "tensorboard")
    assert [step for step, _ in scalars["train/loss"]] == [1, 2]
    assert main([*common, "--out", str(tmp_path / "off"), "--no-tensorboard", "--no-progress"]) == 0
    assert (tmp_path / "off" / "results.json").is_file() and not (tmp_path / "off" / "tensorboard").exists()
