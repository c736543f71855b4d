"""The run folder's pieces on their own: opening it for a new or a resumed run, and the log."""

import json

import pytest

from torch_wge.training.checkpoint import CheckpointError, load_checkpoint
from torch_wge.training.run_folder import (
    RunFolderBusy,
    RunFolderHoldsRun,
    RunLog,
    checkpoint_file,
    open_run_folder,
    read_log,
)


def test_open_refuses_what_it_must_and_leaves_the_folder_unlocked(tmp_path):
    folder = tmp_path / "run"
    with pytest.raises(CheckpointError, match="nothing to resume"):
        open_run_folder(folder, resume=True)
    (folder / "last.pt").write_bytes(b"x")
    with pytest.raises(RunFolderHoldsRun):
        open_run_folder(folder, resume=False)
    lock = open_run_folder(folder, resume=True)  # both refusals released the lock they took
    with pytest.raises(RunFolderBusy):
        open_run_folder(folder, resume=True)
    lock.release()
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        open_run_folder(tmp_path / "file", resume=False)


def test_a_new_run_removes_the_files_of_a_run_killed_before_its_first_checkpoint(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"dataset": "codex-s", "epochs": 3}))
    (tmp_path / "notes.txt").write_text("mine")
    RunLog(tmp_path / "log.jsonl").epoch(1, loss=1.0, lr=0.1, seconds=2.0, wall_seconds=2.0)
    open_run_folder(tmp_path, resume=False).release()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    "files",
    [
        {"log.jsonl": "my own notes\n", "config.json": '{"theme": "dark"}'},
        {"log.jsonl": '{"event": "login", "user": "ann"}\n'},  # JSON lines, but no run's records
        {"config.json": '{"dataset": "codex-s", "colour": "red"}'},
        {"config.json": "[1, 2]"},
    ],
)
def test_a_new_run_refuses_files_named_as_a_runs_that_no_run_wrote(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(RunFolderHoldsRun, match="of no torch_wge run; fit.overwrite=True. replaces them") as refused:
        open_run_folder(tmp_path, resume=False)
    assert refused.value.files == [name for name in ("log.jsonl", "config.json") if name in files]
    assert {name: (tmp_path / name).read_text() for name in files} == files  # nothing was replaced
    open_run_folder(tmp_path, resume=False, overwrite=True).release()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("held", ["best.pt", "results.json", "last.pt"])
def test_a_new_run_replaces_a_run_only_with_overwrite(tmp_path, held):
    for name in ("log.jsonl", held, "notes.txt"):
        (tmp_path / name).write_text("old")
    with pytest.raises(RunFolderHoldsRun) as refused:
        open_run_folder(tmp_path, resume=False)
    assert refused.value.resumable == (held == "last.pt")
    assert (tmp_path / held).read_text() == "old"  # nothing was removed
    open_run_folder(tmp_path, resume=False, overwrite=True).release()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


def test_overwrite_writes_through_a_linked_last_pt_as_a_resume_does(tmp_path):
    # the new run's checkpoints go where the links point (another disk, say), as every write does
    folder, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    for name in ("last.pt", "log.jsonl"):
        (elsewhere / name).write_text("the replaced run's")
        (folder / name).symlink_to(elsewhere / name)
    open_run_folder(folder, resume=False, overwrite=True).release()
    assert (folder / "last.pt").is_symlink() and (folder / "log.jsonl").is_symlink()
    assert not (elsewhere / "last.pt").exists() and not (elsewhere / "log.jsonl").exists()  # the replaced run's files
    RunLog(folder / "log.jsonl").epoch(1, loss=1.0, lr=0.1, seconds=2.0, wall_seconds=2.0)
    assert (folder / "log.jsonl").is_symlink() and read_log(elsewhere / "log.jsonl")[0]["epoch"] == 1


def test_a_symbolic_link_loop_is_said_to_be_one(tmp_path, capsys):
    from torch_wge.cli import main

    (tmp_path / "loop.pt").symlink_to(tmp_path / "loop.pt")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "best.pt").symlink_to(tmp_path / "run" / "best.pt")
    (tmp_path / "gone.pt").symlink_to(tmp_path / "missing.pt")
    for run in (tmp_path / "loop.pt", tmp_path / "run"):
        with pytest.raises(OSError, match="a symbolic link loop") as error:
            checkpoint_file(run)
        assert error.value.filename.endswith(".pt")
    with pytest.raises(FileNotFoundError, match=r"a symbolic link to '.*missing.pt', which does not exist"):
        checkpoint_file(tmp_path / "gone.pt")
    with pytest.raises(OSError, match="a symbolic link loop"):
        load_checkpoint(tmp_path / "loop.pt")
    for argv in (["evaluate", str(tmp_path / "loop.pt")], ["train", "--dataset", str(tmp_path / "loop.pt")]):
        assert main(argv) == 2
        said = capsys.readouterr().err.strip()
        assert said.endswith(f"{tmp_path / 'loop.pt'}: a symbolic link loop (the link leads back to itself)"), said


def test_a_triples_file_that_is_a_link_loop_is_said_to_be_one(tmp_path):
    from torch_wge.datasets import TriplesFolder

    for name in ("valid.txt", "test.txt"):
        (tmp_path / name).write_text("a\tr\tb\n")
    (tmp_path / "train.txt").symlink_to(tmp_path / "train.txt")
    with pytest.raises(OSError, match="a symbolic link loop") as error:
        TriplesFolder(str(tmp_path), log=False)
    assert error.value.filename == str(tmp_path / "train.txt")


def test_log_records_and_truncation(tmp_path):
    log = RunLog(tmp_path / "log.jsonl")
    for epoch in (1, 2, 3):
        log.epoch(epoch, loss=1.0 / epoch, lr=0.1, seconds=2.0, wall_seconds=2.0 * epoch)
        if epoch % 2 == 0:
            log.validation(epoch, 0.5, 2.0 * epoch + 0.5, {"both.mrr": 0.25}, trained={"both.mrr": 0.2})
    log.final(2, {"both.mrr": 0.25}, {"both.mrr": 0.24})
    records = read_log(tmp_path / "log.jsonl")
    assert [(r["event"], r.get("epoch")) for r in records] == [
        ("epoch", 1),
        ("epoch", 2),
        ("eval", 2),
        ("epoch", 3),
        ("final", None),
    ]
    assert records[2] == {
        "event": "eval",
        "split": "valid",
        "epoch": 2,
        "seconds": 0.5,
        "wall_seconds": 4.5,
        "both.mrr": 0.25,
        "trained_weights": {"both.mrr": 0.2},
    }
    assert records[4] == {"event": "final", "best_epoch": 2, "valid": {"both.mrr": 0.25}, "test": {"both.mrr": 0.24}}
    log.truncate(2)  # a resume from epoch 2 drops epoch 3 and the final record
    assert [json.loads(line)["event"] for line in (tmp_path / "log.jsonl").read_text().splitlines()] == [
        "epoch",
        "epoch",
        "eval",
    ]
    RunLog(tmp_path / "other.jsonl", enabled=False).epoch(1, 1.0, 0.1, 1.0, 1.0)  # not the writing process
    assert not (tmp_path / "other.jsonl").exists()
