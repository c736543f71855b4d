"""``torch-wge tune`` on a small random KG: a study's trials and their run folders,
pruning, resuming after a kill, two workers on one storage, the best settings
file, and bad search spaces."""

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

optuna = pytest.importorskip("optuna")

from optuna.trial import TrialState  # noqa: E402

from torch_wge.cli import main  # noqa: E402
from torch_wge.testing import random_kg, write_triples_folder  # noqa: E402
from torch_wge.training.checkpoint import load_checkpoint  # noqa: E402
from torch_wge.training.run_folder import read_log  # noqa: E402
from torch_wge.tune import DEFAULT_SPACE, check_space, suggest, tune  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]

#: A small space: every trial trains a few epochs of a tiny model.
SPACE = {
    "lr": {"type": "float", "low": 1e-3, "high": 5e-2, "log": True},
    "num_layers": {"type": "categorical", "choices": [1, 2]},
    "hidden_channels": {"type": "categorical", "choices": [2, 4]},
}


@pytest.fixture(scope="module")
def kg_folder(tmp_path_factory):
    """A small KG as a folder of triple files."""
    return write_triples_folder(random_kg(30, 3, 300, seed=7), tmp_path_factory.mktemp("kg"))


def write_json(path: Path, value) -> Path:
    path.write_text(json.dumps(value))
    return path


def tune_argv(kg_folder, tmp: Path, out: Path, epochs: int = 4, space=SPACE, *extra) -> list:
    base = write_json(tmp / "base.json", {"epochs": epochs, "eval_every": 2, "batch_size": 64})
    space_file = write_json(tmp / "space.json", space)
    return [
        "tune",
        "--dataset",
        str(kg_folder),
        "--root",
        str(tmp / "data"),
        "--config",
        str(base),
        "--space",
        str(space_file),
        "--out",
        str(out),
        "--no-progress",
        "--threads",
        "1",
        *extra,
    ]


def load(out: Path) -> optuna.Study:
    return optuna.load_study(study_name="wge", storage=f"sqlite:///{out / 'study.db'}")


def evaluations(folder: Path) -> list:
    """The losses and validation MRRs a run folder's log holds, in order."""
    return [(r["event"], r["epoch"], r.get("loss", r.get("both.mrr"))) for r in read_log(folder / "log.jsonl")[:-1]]


@pytest.fixture(scope="module")
def study_folder(kg_folder, tmp_path_factory):
    """A finished 3-trial study (on a dataset processed in it); what it wrote to stderr in ``stderr.txt``."""
    tmp = tmp_path_factory.mktemp("tune")
    out = tmp / "out"
    threads = torch.get_num_threads()
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        code = main(tune_argv(kg_folder, tmp, out, 4, SPACE, "--trials", "3"))
    torch.set_num_threads(threads)
    assert code == 0
    (tmp / "stderr.txt").write_text(stderr.getvalue())
    return out


def test_no_progress_prints_no_processing_message(study_folder):
    assert "Processing" not in (study_folder.parent / "stderr.txt").read_text()


def test_a_study_records_each_trial_as_a_run_folder(study_folder, capsys):
    study = load(study_folder)
    trials = study.get_trials()
    assert [t.number for t in trials] == [0, 1, 2]
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert len({tuple(t.params.items()) for t in trials}) == 3
    for trial in trials:
        folder = study_folder / "trials" / str(trial.number)
        results = json.loads((folder / "results.json").read_text())
        assert results["epochs_trained"] == 4
        assert {k: results["config"][k] for k in trial.params} == trial.params
        # the value is the best checkpoint's validation MRR: the largest logged at a validation
        logged = [mrr for event, _, mrr in evaluations(folder) if event == "eval"]
        assert trial.value == results["valid"]["metrics"]["both"]["mrr"] == max(logged)
        assert trial.intermediate_values == {2: logged[0], 4: logged[1]}
        # chosen on validation only: no trial ranks the test split
        assert results["test"] is None
        final = json.loads((folder / "log.jsonl").read_text().splitlines()[-1])
        assert final["event"] == "final" and final["test"] is None
    best = max(trials, key=lambda t: t.value)
    assert json.loads((study_folder / "best.json").read_text()) == best.user_attrs["config"]


def test_the_best_settings_file_reproduces_its_trial(study_folder, tmp_path, one_torch_thread):
    best = json.loads((study_folder / "best.json").read_text())
    trial = max(load(study_folder).get_trials(), key=lambda t: t.value)
    out = tmp_path / "again"
    code = main(["train", "--config", str(study_folder / "best.json"), "--out", str(out), "--no-progress"])
    assert code == 0
    assert json.loads((out / "config.json").read_text()) == best
    assert evaluations(out) == evaluations(study_folder / "trials" / str(trial.number))


def test_the_same_command_again_adds_no_trial(kg_folder, study_folder, capsys, one_torch_thread):
    tmp = study_folder.parent
    assert main(tune_argv(kg_folder, tmp, study_folder, 4, SPACE, "--trials", "3")) == 0
    assert len(load(study_folder).get_trials()) == 3
    out = capsys.readouterr().out
    assert "3 trials (3 complete" in out
    best = max(load(study_folder).get_trials(), key=lambda t: t.value).number
    assert f"rank the best on test once: torch-wge evaluate {study_folder / 'trials' / str(best) / 'best.pt'}" in out


def test_an_enqueued_settings_file_is_tried_first_and_once(kg_folder, tmp_path, one_torch_thread):
    # the searched settings it names are fixed, the one it does not (hidden_channels) is drawn, the
    # one the space does not search (epochs) is the study's own
    settings = write_json(tmp_path / "known.json", {"lr": 0.0123, "num_layers": 2, "epochs": 99})
    out = tmp_path / "out"
    assert main(tune_argv(kg_folder, tmp_path, out, 2, SPACE, "--trials", "1", "--enqueue", str(settings))) == 0
    (first,) = load(out).get_trials()
    assert first.params["lr"] == 0.0123 and first.params["num_layers"] == 2
    assert first.params["hidden_channels"] in (2, 4) and first.user_attrs["config"]["epochs"] == 2
    # the same command, two trials more: nothing queued again
    assert main(tune_argv(kg_folder, tmp_path, out, 2, SPACE, "--trials", "3", "--enqueue", str(settings))) == 0
    trials = load(out).get_trials()
    assert len(trials) == 3 and [t.params["lr"] == 0.0123 for t in trials] == [True, False, False]


def test_settings_drawn_again_are_not_trained_again(kg_folder, tmp_path, capsys, one_torch_thread):
    # a space of one point that is no grid (a float range of one value): trial 0 trains it, the
    # sampler can only draw it again
    space = {"lr": {"type": "float", "low": 0.01, "high": 0.01}}
    out = tmp_path / "out"
    assert main(tune_argv(kg_folder, tmp_path, out, 2, space, "--trials", "3")) == 0
    trials = load(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert [t.value for t in trials] == [trials[0].value] * 3 and trials[0].value > 0
    assert [t.user_attrs.get("repeats") for t in trials] == [None, 0, 0]
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["0"]  # one run folder: one training
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("trial ")]
    assert (
        lines[1].startswith("trial 1 | complete | validation MRR")
        and "settings of trial 0: not trained again" in lines[1]
    )


def test_a_categorical_space_is_a_grid_tried_once_each(kg_folder, tmp_path, capsys, one_torch_thread):
    space = {
        "num_layers": {"type": "categorical", "choices": [1, 2]},
        "dropout": {"type": "categorical", "choices": [0.0, 0.3]},
    }
    known = write_json(tmp_path / "known.json", {"num_layers": 2, "dropout": 0.3})
    out = tmp_path / "out"
    assert main(tune_argv(kg_folder, tmp_path, out, 2, space, "--trials", "10", "--enqueue", str(known))) == 0
    drawn = [(t.params["num_layers"], t.params["dropout"]) for t in load(out).get_trials()]
    # the queued settings first, then the untried combinations in the space's order, then the end
    assert drawn == [(2, 0.3), (1, 0.0), (1, 0.3), (2, 0.0)]
    assert "every one of the space's 4 combinations has been tried" in capsys.readouterr().out
    # the same command again trains nothing more
    assert main(tune_argv(kg_folder, tmp_path, out, 2, space, "--trials", "10", "--enqueue", str(known))) == 0
    assert len(load(out).get_trials()) == 4


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"lr": 0.5}, "lr: 0.5 is outside the space's [0.001, 0.05]"),
        ({"num_layers": 3}, "num_layers: 3 is not one of the choices [1, 2]"),
        ({"lr": "fast"}, "lr: expected a float, found 'fast'"),
        ({"dropout": 0.1}, "names none of the searched settings (lr, num_layers, hidden_channels)"),
    ],
)
def test_a_bad_enqueued_file_is_one_line_naming_it(settings, message, kg_folder, tmp_path, capsys):
    path = write_json(tmp_path / "known.json", settings)
    argv = tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, "--trials", "1", "--enqueue", str(path))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: {message}" in err, err
    assert not (tmp_path / "out").exists()


def test_an_enqueued_value_must_lie_on_an_int_specs_grid():
    from torch_wge.training.settings_file import SettingsFileError
    from torch_wge.tune import fixed_params

    space = {"epochs": {"type": "int", "low": 100, "high": 500, "step": 100}}
    assert fixed_params({"epochs": 300}, space, "f") == {"epochs": 300}
    for value, message in (
        (150, "f: epochs: 150 is not on the space's grid 100, 200, ... (step 100)"),
        (300.0, "f: epochs: expected an int"),
    ):
        with pytest.raises(SettingsFileError, match=re.escape(message)):
            fixed_params({"epochs": value}, space, "f")


class PruneAllButTheFirst(optuna.pruners.BasePruner):
    """Prunes every trial but trial 0 at its first report."""

    def prune(self, study, trial):
        return trial.number > 0


def test_a_pruned_trial_stops_at_its_validation(kg_folder, tmp_path, one_torch_thread):
    base = {"dataset": str(kg_folder), "root": str(tmp_path / "data"), "epochs": 6, "eval_every": 2, "batch_size": 64}
    lines = []
    study = tune(
        base, SPACE, tmp_path / "out", trials=2, pruner=PruneAllButTheFirst(), progress=False, echo=lines.append
    )
    first, pruned = study.get_trials()
    assert (first.state, pruned.state) == (TrialState.COMPLETE, TrialState.PRUNED)
    folder = tmp_path / "out" / "trials" / "1"
    records = read_log(folder / "log.jsonl")
    assert [r["epoch"] for r in records if r["event"] == "epoch"] == [1, 2]  # of 6 epochs
    assert pruned.intermediate_values == {2: records[-1]["both.mrr"]}
    assert not (folder / "results.json").exists() and (folder / "last.pt").is_file()
    assert lines[1].startswith("trial 1 | pruned | pruned at epoch 2 (validation MRR ")


def run_tune_process(argv: list) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "torch_wge", *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(condition, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_killed_study_resumes_without_losing_or_repeating_a_trial(kg_folder, tmp_path, capsys, one_torch_thread):
    out = tmp_path / "out"
    argv = tune_argv(kg_folder, tmp_path, out, 16, SPACE, "--trials", "3", "--heartbeat", "1")
    process = run_tune_process(argv)
    first_log = out / "trials" / "1" / "log.jsonl"
    try:  # killed once trial 1 has saved an epoch after its first validation
        wait_for(lambda: first_log.is_file() and len(first_log.read_bytes().splitlines()) >= 4)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not (out / "trials" / "1" / "results.json").exists()  # killed during trial 1
    saved = load_checkpoint(out / "trials" / "1" / "last.pt")["epoch"]
    kept = [r for r in read_log(first_log) if r["epoch"] <= saved]
    finished = (out / "trials" / "0" / "results.json").read_bytes()
    killed = load(out).get_trials()[1]
    assert killed.state == TrialState.RUNNING
    # past the grace period of two heartbeats (2 s) as SQLite sees it: its timestamps are whole
    # seconds, so a heartbeat 2.5 s back can read as 2 s; 3.5 s reads as 3 s or more
    time.sleep(3.5)

    assert main(argv) == 0
    trials = load(out).get_trials()
    states = [t.state for t in trials]
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    assert trials[2].params == killed.params  # the killed trial's settings, continued
    assert trials[2].system_attrs["failed_trial"] == 1
    assert (out / "trials" / "0" / "results.json").read_bytes() == finished  # trial 0 kept, not run again
    # trial 2 continued trial 1's run folder from its checkpoint: the epochs saved before the kill are
    # those of the killed process (their times too), and the study keeps the MRRs trial 1 reported
    assert not (out / "trials" / "1").exists()
    log = read_log(out / "trials" / "2" / "log.jsonl")
    assert len(log) == 16 + 8 + 1 and log[: len(kept)] == kept and saved >= 2
    assert killed.intermediate_values and set(killed.intermediate_values) <= set(trials[2].intermediate_values)
    assert all(trials[2].intermediate_values[e] == v for e, v in killed.intermediate_values.items())
    printed = capsys.readouterr().out
    assert "trial 1 was left running by a worker that stopped" in printed
    assert "trial 2 continues the run of killed trial 1 from its last checkpoint" in printed


def test_a_trial_of_several_seeds_takes_the_mean_of_their_runs(kg_folder, tmp_path, capsys, one_torch_thread):
    out = tmp_path / "out"
    argv = tune_argv(kg_folder, tmp_path, out, 4, SPACE, "--trials", "2", "--seeds", "2")
    assert main(argv) == 0
    printed = capsys.readouterr().out
    trials = load(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for trial in trials:
        folders = [out / "trials" / str(trial.number) / f"seed-{seed}" for seed in (0, 1)]
        results = [json.loads((folder / "results.json").read_text()) for folder in folders]
        assert [r["config"]["seed"] for r in results] == [0, 1]
        assert all({k: r["config"][k] for k in trial.params} == trial.params for r in results)
        mrrs = [r["valid"]["metrics"]["both"]["mrr"] for r in results]
        assert evaluations(folders[0]) != evaluations(folders[1])  # two seeds, two runs
        assert trial.value == pytest.approx((mrrs[0] + mrrs[1]) / 2, abs=1e-12)
        assert trial.user_attrs["seed_mrrs"] == {"0": mrrs[0], "1": mrrs[1]}
        # the pruner saw the first seed's validations only
        assert list(trial.intermediate_values.values()) == [m for e, _, m in evaluations(folders[0]) if e == "eval"]
        assert f"mean of seeds 0, 1: {mrrs[0]:.4f} / {mrrs[1]:.4f}" in printed
    best = max(trials, key=lambda t: t.value)
    assert json.loads((out / "best.json").read_text())["seed"] == 0
    assert f"torch-wge evaluate {out / 'trials' / str(best.number) / 'seed-0' / 'best.pt'}" in printed
    # the study keeps its number of seeds
    assert main(tune_argv(kg_folder, tmp_path, out, 4, SPACE, "--trials", "3")) == 2
    assert "(differing: seeds)" in capsys.readouterr().err


def test_a_killed_trial_of_several_seeds_continues_its_unfinished_run(kg_folder, tmp_path, capsys, one_torch_thread):
    out = tmp_path / "out"
    argv = tune_argv(kg_folder, tmp_path, out, 8, SPACE, "--trials", "1", "--seeds", "2", "--heartbeat", "1")
    process = run_tune_process(argv)
    second_log = out / "trials" / "0" / "seed-1" / "log.jsonl"
    try:  # killed once the second seed's run has saved an epoch after its first validation
        wait_for(lambda: second_log.is_file() and len(second_log.read_bytes().splitlines()) >= 4)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    first_results = (out / "trials" / "0" / "seed-0" / "results.json").read_bytes()
    saved = load_checkpoint(out / "trials" / "0" / "seed-1" / "last.pt")["epoch"]
    kept = [r for r in read_log(second_log) if r["epoch"] <= saved]
    time.sleep(3.5)  # past two heartbeats, as in the test above

    assert main(argv) == 0
    killed, continued = load(out).get_trials()
    assert (killed.state, continued.state) == (TrialState.FAIL, TrialState.COMPLETE)
    assert "trial 1 continues the run of killed trial 0 from its last checkpoint" in capsys.readouterr().out
    folder = out / "trials" / "1"
    assert (folder / "seed-0" / "results.json").read_bytes() == first_results  # finished: not trained again
    log = read_log(folder / "seed-1" / "log.jsonl")
    assert log[: len(kept)] == kept and [r["epoch"] for r in log if r["event"] == "epoch"] == list(range(1, 9))
    mrrs = [
        json.loads((folder / f"seed-{s}" / "results.json").read_text())["valid"]["metrics"]["both"]["mrr"]
        for s in (0, 1)
    ]
    assert continued.value == pytest.approx(sum(mrrs) / 2, abs=1e-12)


def test_two_workers_share_one_study(kg_folder, tmp_path):
    out = tmp_path / "out"
    argv = tune_argv(kg_folder, tmp_path, out, 4, SPACE, "--trials", "4", "--heartbeat", "5")
    workers = [run_tune_process(argv) for _ in range(2)]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], outputs
    trials = load(out).get_trials()
    # workers that look at the same instant may each start one more trial
    assert 4 <= len(trials) <= 5 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len({tuple(sorted(t.params.items())) for t in trials}) == len(trials)  # no settings drawn twice
    ran = [line for stdout, _ in outputs for line in stdout.splitlines() if " | complete | " in line]
    assert sorted(int(line.split()[1]) for line in ran) == [t.number for t in trials]  # each trial by one worker
    for trial in trials:
        assert json.loads((out / "trials" / str(trial.number) / "results.json").read_text())["epochs_trained"] == 4


def test_workers_with_their_own_out_name_the_folder_where_the_best_trial_ran(kg_folder, tmp_path, capsys):
    # the documented setup of several machines: one storage, each worker its own --out; here one after
    # the other, so that each runs one trial: one of the two summaries names the other's folder
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    space = {"hidden_channels": {"type": "categorical", "choices": [2, 4]}}

    def worker(name: str, trials: int) -> str:
        argv = tune_argv(kg_folder, tmp_path, tmp_path / name, 2, space, "--trials", str(trials))
        assert main(argv + ["--storage", storage]) == 0
        return capsys.readouterr().out

    capsys.readouterr()
    worker("w1", 1)
    worker("w2", 2)
    study = optuna.load_study(study_name="wge", storage=storage)
    assert [t.state for t in study.get_trials()] == [TrialState.COMPLETE] * 2
    ran = {t.number: Path(t.user_attrs["folder"]) for t in study.get_trials()}
    assert ran == {0: tmp_path / "w1" / "trials" / "0", 1: tmp_path / "w2" / "trials" / "1"}
    best = study.best_trial.number
    for name in ("w1", "w2"):  # each worker's closing lines, once the study is over
        printed = worker(name, 2)
        line = next(line for line in printed.splitlines() if "rank the best on test once" in line)
        named = Path(line.split("torch-wge evaluate ")[1].split(" (")[0])
        assert named == ran[best] / "best.pt" and named.is_file(), line
        elsewhere = ran[best].parent.parent != tmp_path / name
        assert line.endswith(f" (trial {best} ran in the --out of another worker)") == elsewhere, line


@pytest.mark.parametrize(
    "space, message",
    [
        ({"learning_rate": {"type": "float", "low": 0.1, "high": 0.2}}, "learning_rate: unknown setting"),
        ({"lr": {"type": "float", "low": 0.0, "high": 0.2}}, "lr: lr must be in (0, 1], got 0.0"),
        ({"dropout": {"type": "float", "low": 0.2, "high": 0.1}}, "dropout: low and high must be floats with low <="),
        ({"lr": {"type": "int", "low": 1, "high": 2}}, "lr: a spec of type int for a setting of type float; use float"),
        ({"num_layers": {"type": "categorical", "choices": []}}, "num_layers: choices must be a non-empty list"),
        ({"num_layers": {"type": "categorical", "choices": [1, -1]}}, "num_layers: num_layers must be >= 0, got -1"),
        ({"views": {"type": "categorical", "choices": ["two-view", "x"]}}, "views: views must be one of"),
        ({"beta": {"type": "uniform", "low": 0, "high": 1}}, 'beta: expected an object with "type" one of'),
        ({"beta": {"type": "float", "low": 0, "high": 1, "q": 0.1}}, "beta: a float spec takes low, high, step, log"),
        ({"lr": {"type": "float", "low": 0.0, "high": 0.1, "log": True}}, "lr: a log spec needs low > 0"),
        ({"dataset": {"type": "categorical", "choices": ["codex-s"]}}, "dataset: not searched"),
        ({}, "expected a non-empty object of settings to search"),
        ([1], "expected an object of settings, found list"),
    ],
)
def test_a_bad_space_is_one_line_naming_the_file_and_key(space, message, kg_folder, tmp_path, capsys):
    argv = tune_argv(kg_folder, tmp_path, tmp_path / "out", 4, space, "--trials", "1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'space.json'}: {message}" in err, err
    assert not (tmp_path / "out").exists()


def test_a_space_file_that_is_no_json_is_one_line(kg_folder, tmp_path, capsys):
    argv = tune_argv(kg_folder, tmp_path, tmp_path / "out", 4, SPACE, "--trials", "1")
    (tmp_path / "space.json").write_text("{lr: 1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'space.json'}: not valid JSON" in err


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"learning_rate": 0.1}, "learning_rate: unknown setting"),
        ({"lr": "fast"}, "lr: setting 'lr' must be a number, found 'fast'"),
        ({"hidden_channels": 0}, "hidden_channels: hidden channels must be positive, got 0"),
        ({"objective": "bce", "candidates": 10}, "candidates needs --objective softmax"),
    ],
)
def test_a_bad_settings_file_is_one_line_naming_the_file_and_key(settings, message, tmp_path, capsys):
    path = write_json(tmp_path / "settings.json", settings)
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: {message}" in err, err


def test_a_yaml_settings_file_is_read_and_the_command_line_wins(tmp_path):
    pytest.importorskip("yaml")
    from torch_wge.cli import build_parser, config_from_args

    path = tmp_path / "settings.yaml"
    path.write_text("lr: 0.002\nnum_layers: 1\nrecipe: paper\n")
    config = config_from_args(build_parser().parse_args(["train", "--config", str(path), "--num-layers", "3"]))
    assert (config.lr, config.num_layers, config.recipe, config.epochs) == (0.002, 3, "paper", 3000)


def test_the_default_space_is_valid_and_drawn_as_given():
    assert check_space(DEFAULT_SPACE, "default") == DEFAULT_SPACE
    chosen = {"num_layers": 3, "lr": 0.005, "batch_size": 512, "hidden_channels": 16, "alpha0": 0.6, "beta": 0.4}
    chosen.update(dropout=0.25, label_smoothing=0.05, weight_decay=0.1, epochs=300)
    assert suggest(optuna.trial.FixedTrial(chosen), DEFAULT_SPACE) == chosen


@pytest.mark.parametrize(
    "name, space_name",
    [
        ("fb15k-237.json", "large-space.json"),
        ("codex-m.json", "large-space.json"),
        ("fb15k-237-cpu.json", "layers-alpha0-space.json"),
        ("fb15k-237-k1-cpu.json", "dropout-beta-space.json"),
        ("fast-recipe.json", "epochs-space.json"),
        ("codex-m.json", "large-epochs-space.json"),
        ("fb15k-237-k1-cpu.json", "channels-space.json"),
        ("fb15k-237-k1-cpu.json", "candidates-space.json"),
        ("fb15k-237-quate-cpu.json", "n3-space.json"),
        ("fb15k-237-quate-cpu.json", "decoder-space.json"),
        ("fb15k-237-quate-cpu.json", "smoothing-n3-space.json"),
    ],
)
def test_the_example_settings_and_space_are_valid(name, space_name):
    from torch_wge.training import TrainConfig
    from torch_wge.training.settings_file import read_mapping, read_settings_file

    examples = REPOSITORY / "examples" / "tune"
    space = check_space(read_mapping(examples / space_name), space_name)
    settings = read_settings_file(examples / name)
    assert not set(settings) & set(space), "tune refuses a setting both shared and searched"
    # the space's smallest and largest settings, over the shared ones, pass train's checks
    for end in (0, -1):
        drawn = {key: spec.get("choices", [spec.get("low"), spec.get("high")])[end] for key, spec in space.items()}
        TrainConfig.from_dict({**settings, **drawn}).validate()


def test_the_small_cpu_space_is_valid_under_the_fast_recipe():
    from torch_wge.training import TrainConfig
    from torch_wge.training.settings_file import read_mapping

    space = check_space(read_mapping(REPOSITORY / "examples" / "tune" / "small-cpu-space.json"), "small-cpu-space.json")
    for end in (0, -1):  # its smallest and largest settings pass train's checks
        drawn = {key: spec.get("choices", [spec.get("low"), spec.get("high")])[end] for key, spec in space.items()}
        TrainConfig.from_dict({"dataset": "litwd1k", **drawn}).validate()


def test_the_fast_recipe_file_holds_the_recipes_values_inside_the_small_cpu_space():
    from torch_wge.training import TrainConfig
    from torch_wge.training.settings_file import read_mapping
    from torch_wge.tune import fixed_params

    folder = REPOSITORY / "examples" / "tune"
    space = check_space(read_mapping(folder / "small-cpu-space.json"), "small-cpu-space.json")
    params = fixed_params(read_mapping(folder / "fast-recipe.json"), space, "fast-recipe.json")
    recipe = TrainConfig(dataset="codex-s", recipe="fast")
    assert params == {name: getattr(recipe, name) for name in space}


def test_plot_draws_a_studys_history_and_importances(study_folder, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from torch_wge.plot import study_figures

    trials = load(study_folder).get_trials()
    figures = study_figures(load(study_folder))
    history = figures["history"].axes[0]
    drawn = sorted(y for collection in history.collections for _, y in collection.get_offsets().tolist())
    assert drawn == sorted(t.value for t in trials)  # one point per trial, at its value
    bars = figures["importances"].axes[0].patches
    assert len(bars) == len(SPACE)

    out = tmp_path / "study.png"
    storage = f"sqlite:///{study_folder / 'study.db'}"
    for argv in (["plot", str(study_folder)], ["plot", "--study", "wge", "--storage", storage]):
        assert main([*argv, "--out", str(out)]) == 0
        for name in ("history", "importances"):
            assert (tmp_path / f"study-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            (tmp_path / f"study-{name}.png").unlink()
    assert main(["plot", "--study", "other", "--storage", storage, "--out", str(out)]) == 2
    assert capsys.readouterr().err.endswith(f"no study 'other' in {storage}\n")


def test_a_time_limit_starts_no_trial_after_it(kg_folder, tmp_path, monkeypatch, one_torch_thread):
    import torch_wge.tune.study as study_module

    # a clock that reads 0 at the start and 40 s more at each look: the 1-minute limit
    # lets the first trial start (40 s) and stops before a second one (80 s)
    readings = iter(range(0, 1000, 40))
    monkeypatch.setattr(study_module, "time", types.SimpleNamespace(monotonic=lambda: next(readings)))
    base = {"dataset": str(kg_folder), "root": str(tmp_path / "data"), "epochs": 2, "batch_size": 64}
    study = tune(base, SPACE, tmp_path / "out", time_limit=1.0, progress=False, echo=lambda line: None)
    assert [t.state for t in study.get_trials()] == [TrialState.COMPLETE]


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "tune: give --trials N, --time-limit MINUTES or both"),
        (["--trials", "1", "--storage", "nosuch://x"], "--storage nosuch://x: cannot open the database"),
        (["--trials", "1", "--time-limit", "-1"], "--time-limit must be positive (minutes), got -1.0"),
    ],
)
def test_bad_tune_options_are_one_line(extra, message, kg_folder, tmp_path, capsys):
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, *extra)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_seeds_below_one_are_one_line(kg_folder, tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:  # argparse's own error
        main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, "--trials", "1", "--seeds", "0"))
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert "argument --seeds: expected an integer >= 1, got '0'" in err


def test_tune_without_optuna_says_how_to_install_it(kg_folder, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, "--trials", "1")) == 2
    assert "pip install 'torch_wge[tune]'" in capsys.readouterr().err


def test_a_trial_that_fails_by_its_settings_counts_and_says_why(kg_folder, tmp_path, capsys, one_torch_thread):
    space = {
        "objective": {"type": "categorical", "choices": ["bce"]},
        "candidates": {"type": "int", "low": 10, "high": 10},
    }
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, space, "--trials", "2")) == 0
    assert [t.state for t in load(tmp_path / "out").get_trials()] == [TrialState.FAIL] * 2
    captured = capsys.readouterr()
    assert captured.out.count("| fail | refused settings: candidates needs --objective softmax") == 2
    assert "Traceback" not in captured.err and not (tmp_path / "out" / "best.json").exists()


def test_a_diverged_trial_is_failed_and_the_study_goes_on(kg_folder, tmp_path, monkeypatch, one_torch_thread):
    from torch_wge.training import Trainer

    monkeypatch.setattr(Trainer, "train_epoch", lambda self, *args: float("nan"))
    base = {"dataset": str(kg_folder), "root": str(tmp_path / "data"), "epochs": 2, "batch_size": 64}
    lines = []
    study = tune(base, SPACE, tmp_path / "out", trials=2, progress=False, echo=lines.append)
    assert [t.state for t in study.get_trials()] == [TrialState.FAIL] * 2
    assert all("| fail | the loss became nan in epoch 1 |" in line for line in lines[:2])


def test_a_study_refuses_another_space(kg_folder, study_folder, capsys):
    space = {**SPACE, "dropout": {"type": "float", "low": 0.0, "high": 0.5}}
    assert main(tune_argv(kg_folder, study_folder.parent, study_folder, 4, space, "--trials", "4")) == 2
    err = capsys.readouterr().err
    assert "was started with another search space or settings (differing: dropout)" in err
    assert len(load(study_folder).get_trials()) == 3


def test_the_command_lines_pruners_are_those_of_the_study():
    from torch_wge.cli import build_parser
    from torch_wge.tune import PRUNERS

    tune_parser = build_parser()._subparsers._group_actions[0].choices["tune"]
    pruner = next(action for action in tune_parser._actions if action.dest == "pruner")
    assert sorted(pruner.choices) == sorted(PRUNERS)


def test_the_median_pruner_judges_only_the_last_quarter_of_the_epochs():
    from torch_wge.tune import PRUNERS

    study = optuna.create_study(direction="maximize", pruner=PRUNERS["median"](500))
    for _ in range(5):  # the trials it compares with: 0.4 at every epoch
        trial = study.ask()
        for epoch in range(10, 501, 10):
            trial.report(0.4, epoch)
        study.tell(trial, 0.4)
    poor = study.ask()
    poor.report(0.1, 370)  # below the median, but in the first three quarters: kept
    assert not poor.should_prune()
    poor.report(0.1, 380)  # below it in the last quarter: pruned
    assert poor.should_prune()


def untrained(monkeypatch, values: dict):
    """Trials valued without training: each its settings' value in ``values`` (a fixed number
    for settings first seen), so that a study of many trials takes no time."""
    from torch_wge.tune.study import Worker

    def validation_mrr(self, trial, config, folder, training, first):
        return values.setdefault(tuple(sorted(trial.params.items())), 0.1 + 0.01 * len(values))

    monkeypatch.setattr(Worker, "validation_mrr", validation_mrr)


THREE_CATEGORICAL = {
    "num_layers": {"type": "categorical", "choices": [1, 2, 3]},
    "alpha0": {"type": "categorical", "choices": [0.3, 0.6, 0.9]},
    "beta": {"type": "categorical", "choices": [0.2, 0.4]},
}


def test_eight_trials_of_three_categorical_settings_draw_eight_points(kg_folder, tmp_path, monkeypatch):
    untrained(monkeypatch, {})
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, THREE_CATEGORICAL, "--trials", "8")) == 0
    drawn = [tuple(t.params.values()) for t in load(tmp_path / "out").get_trials()]
    assert len(drawn) == 8 and len(set(drawn)) >= 6


def test_the_trials_draw_what_the_studys_sampler_draws(kg_folder, tmp_path, monkeypatch, capsys):
    # not a grid (lr is a float): every trial is drawn by the sampler, seeded once per worker, not
    # per trial (reseeding by the trial's number drew batch_size 4096 and epochs 500 in trials 0-2)
    from torch_wge.tune.space import suggest
    from torch_wge.tune.study import worker_seed

    space = {**THREE_CATEGORICAL, "lr": {"type": "float", "low": 1e-3, "high": 5e-2, "log": True}}
    untrained(monkeypatch, {})
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, space, "--trials", "8")) == 0
    drawn = [t.params for t in load(tmp_path / "out").get_trials()]
    reference = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=worker_seed(0, 0), constant_liar=True)
    )
    expected = []
    reference.optimize(lambda trial: expected.append(suggest(trial, space)) or 0.5, n_trials=8)
    assert drawn == expected
    assert len({(p["num_layers"], p["alpha0"], p["beta"]) for p in drawn}) >= 6
    # the same command again is the study's next worker: it draws anew, no repeat of the first eight
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, space, "--trials", "12")) == 0
    lrs = [t.params["lr"] for t in load(tmp_path / "out").get_trials()]
    assert len(lrs) == 12 and len(set(lrs)) == 12


def test_settings_of_the_config_file_are_taken_out_of_the_default_space(kg_folder, tmp_path, monkeypatch, capsys):
    untrained(monkeypatch, {})
    argv = tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, "--trials", "3")
    del argv[argv.index("--space") : argv.index("--space") + 2]  # the default space, which draws epochs too
    assert main(argv) == 0
    trials = load(tmp_path / "out").get_trials()
    assert all(t.user_attrs["config"]["epochs"] == 2 and t.user_attrs["config"]["batch_size"] == 64 for t in trials)
    assert all("epochs" not in t.params and "batch_size" not in t.params and "lr" in t.params for t in trials)
    said = [line for line in capsys.readouterr().err.splitlines() if "not searched" in line]
    assert said == [
        f"torch-wge tune: not searched, shared by every trial: batch_size (--config {tmp_path / 'base.json'}), "
        f"epochs (--config {tmp_path / 'base.json'})"
    ]


def test_a_setting_both_shared_and_searched_is_refused(kg_folder, tmp_path, capsys):
    space = {**SPACE, "epochs": {"type": "categorical", "choices": [2, 4]}}
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, space, "--trials", "1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"--space {tmp_path / 'space.json'}: searches settings every trial shares, epochs (--config" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="epochs: in both the shared settings and the search space"):
        tune({"dataset": str(kg_folder), "epochs": 2}, space, tmp_path / "out", trials=1)


def test_no_progress_bars_when_the_output_is_no_terminal(kg_folder, tmp_path, capsys, one_torch_thread):
    argv = tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, "--trials", "1")
    argv.remove("--no-progress")
    assert main(argv) == 0
    err = capsys.readouterr().err  # captured: no terminal
    assert "\r" not in err and "epochs:" not in err and "it/s" not in err and "epoch/s" not in err, err


@pytest.mark.parametrize(
    "content, message",
    [
        ("[]", "holds no validation MRR in [0, 1]"),
        ('{"valid": 1}', "holds no validation MRR in [0, 1]"),
        ('{"valid": {"metrics": {"both": {"mrr": NaN}}}}', "holds no validation MRR in [0, 1]"),
        ("", "not valid JSON"),
        ("[" * 100_000, "nested deeper than 32 levels"),
    ],
)
def test_a_damaged_results_file_of_a_finished_seed_is_one_line_naming_it(content, message, tmp_path):
    from torch_wge.training import TrainConfig
    from torch_wge.tune.study import Worker

    folder = tmp_path / "trials" / "0" / "seed-0"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(content)
    worker = Worker({"dataset": "codex-s"}, SPACE, tmp_path, seeds=2)
    with pytest.raises(ValueError) as refused:
        worker.validation_mrr(None, TrainConfig(), folder, (None, ""), first=True)
    assert str(refused.value).startswith(f"{folder / 'results.json'}: ") and message in str(refused.value)
    assert str(refused.value).endswith("remove it to train the run again")


@pytest.mark.parametrize(
    "option, content, message",
    [
        ("--space", None, "not a regular file"),
        ("--enqueue", None, "not a regular file"),
        ("--config", None, "not a regular file"),
        ("--space", '{"lr": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 32 levels"),
    ],
)
def test_a_fifo_or_deep_tune_file_is_one_line_naming_it(option, content, message, kg_folder, tmp_path, capsys):
    argv = tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, "--trials", "1")
    path = tmp_path / "file.json"
    if content is None:
        os.mkfifo(path)  # read, it would block until a writer came
    else:
        path.write_text(content)
    if option == "--enqueue":
        argv += [option, str(path)]
    else:
        argv[argv.index(option) + 1] = str(path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and message in err, err


def test_an_empty_study_name_is_refused(kg_folder, tmp_path, capsys):
    assert main(tune_argv(kg_folder, tmp_path, tmp_path / "out", 2, SPACE, "--trials", "1", "--study", "")) == 2
    assert capsys.readouterr().err == "torch-wge tune: error: --study: empty study name\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--study", "wge", "--storage", "bogus://x"], "--storage bogus://x: cannot open the database"),
        (["--study", "", "--storage", "sqlite:///x.db"], "--study: empty study name"),
        (["{tmp}"], 'study.json: expected {"study": NAME, "storage": URL}'),
    ],
)
def test_plot_of_a_study_that_cannot_be_opened_is_one_line(argv, message, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "study.json").write_text(json.dumps({"study": "", "storage": "sqlite:///x.db"}))
    assert main(["plot", *(arg.format(tmp=tmp_path) for arg in argv), "--out", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("torch-wge plot: error: ") and message in err, err


def test_a_value_quoted_in_a_space_error_is_cut_before_it_is_formatted():
    from torch_wge.training.settings_file import SettingsFileError
    from torch_wge.tune import fixed_params

    space = {"num_layers": {"type": "categorical", "choices": [1] * 10**6}}
    with pytest.raises(SettingsFileError) as refused:
        fixed_params({"num_layers": [[2] * 10**6]}, space, "f")
    assert (
        str(refused.value)
        == "f: num_layers: [[2, 2, 2, 2, 2, 2, ...]] is not one of the choices [1, 1, 1, 1, 1, 1, ...]"
    )
    with pytest.raises(SettingsFileError, match=r"found \['x', 'x', 'x', 'x', 'x', 'x', ...\]$"):
        check_space({"lr": ["x"] * 10**6}, "f")
