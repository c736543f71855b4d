"""A run killed at any file operation resumes to exactly the uninterrupted result.

Each case forks a child process that trains and dies with ``os._exit`` (like
``kill -9``: no clean-up code runs) at its n-th file operation: in the middle
of a write (the file cut short), after a complete write before its rename, or
after a rename before the folder is synced. The parent then resumes the run
and compares every file with an uninterrupted run.
"""

import json
import os
import shutil
import stat
import traceback

import pytest
import torch

from torch_wge.training import TrainConfig, Trainer, load_checkpoint
from torch_wge.training.run_folder import read_log

CONFIG = dict(
    recipe="paper", dataset="random", epochs=3, hidden_channels=2, batch_size=64, lr=0.01, eval_every=2, seed=3
)


@pytest.fixture(scope="module")
def data(tiny_two_view_kg):
    return tiny_two_view_kg


@pytest.fixture(autouse=True)
def _single_thread(one_torch_thread):
    """One torch thread: deterministic sums, and safe to fork."""


def fit(data, folder, resume=False, epochs=CONFIG["epochs"]):
    return Trainer(TrainConfig(**{**CONFIG, "epochs": epochs}), data, folder, progress=False).fit(resume=resume)


def die_at(n):
    """Wraps os.fsync and os.replace so that the n-th call of either (counted
    from 1) ends the process; returns the call counter."""
    real_fsync, real_replace = os.fsync, os.replace
    calls = [0]

    def fsync(fd):
        calls[0] += 1
        if calls[0] == n:
            if stat.S_ISREG(os.fstat(fd).st_mode):  # cut the last write in half
                with open(f"/proc/self/fd/{fd}", "rb") as f:  # the log is open for appending only
                    content = f.read()
                size = len(content)
                start = content.rstrip(b"\n").rfind(b"\n") + 1
                os.ftruncate(fd, (start + size) // 2)
            os._exit(137)
        real_fsync(fd)

    def replace(src, dst):
        calls[0] += 1
        if calls[0] == n:
            os._exit(137)
        real_replace(src, dst)

    os.fsync, os.replace = fsync, replace
    return calls


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


def count_file_operations(work):
    """The number of fsync and replace calls that ``work`` makes (in a child process)."""
    read, write = os.pipe()

    def counted():
        calls = die_at(0)
        work()
        os.write(write, str(calls[0]).encode())

    assert in_child(counted) == 0
    os.close(write)
    return int(os.read(read, 100))


def records(folder):
    return [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]


def assert_same_run(folder, reference):
    """Every file of ``folder`` equals the uninterrupted run's (times aside)."""
    last, ref_last = load_checkpoint(folder / "last.pt"), load_checkpoint(reference / "last.pt")
    assert last["epoch"] == ref_last["epoch"] and last["best"] == ref_last["best"]
    for name, value in ref_last["model"].items():
        assert torch.equal(last["model"][name], value), name
    best, ref_best = load_checkpoint(folder / "best.pt"), load_checkpoint(reference / "best.pt")
    assert best["epoch"] == ref_best["epoch"] and best["valid"] == ref_best["valid"]
    for name, value in ref_best["model"].items():
        assert torch.equal(best["model"][name], value), name
    results = json.loads((folder / "results.json").read_text())
    ref_results = json.loads((reference / "results.json").read_text())
    assert results["best_epoch"] == ref_results["best_epoch"]
    assert results["test"] == ref_results["test"] and results["valid"] == ref_results["valid"]
    log, ref_log = records(folder), records(reference)
    assert [(r["event"], r.get("epoch")) for r in log] == [(r["event"], r.get("epoch")) for r in ref_log]
    assert [r["loss"] for r in log if r["event"] == "epoch"] == [r["loss"] for r in ref_log if r["event"] == "epoch"]
    assert not [p.name for p in folder.iterdir() if ".tmp-" in p.name]  # no leftovers


def finish(data, folder):
    """What a user does after a kill: resume, or start again when no epoch was saved."""
    fit(data, folder, resume=(folder / "last.pt").exists())


@pytest.mark.slow  # ~12 s: a run killed at each of its file operations; .ci/run includes it
def test_kill_at_every_file_operation_of_a_run(data, tmp_path):
    reference = tmp_path / "reference"
    fit(data, reference)
    assert [r["epoch"] for r in records(reference) if r["event"] == "epoch"] == [1, 2, 3]
    total = count_file_operations(lambda: fit(data, tmp_path / "count"))
    assert total >= 20  # config, 3 epochs (log, last.pt, best.pt), results, final record
    for n in range(1, total + 1):
        folder = tmp_path / f"killed-{n}"
        assert in_child(lambda: (die_at(n), fit(data, folder))) == 137, n
        finish(data, folder)
        assert_same_run(folder, reference)


def test_kill_at_every_file_operation_of_a_resume(data, tmp_path):
    """A run killed after logging epoch 3 but before its checkpoint, whose
    resume (which drops that record from the log) is killed in turn."""
    reference = tmp_path / "reference"
    fit(data, reference)
    start = tmp_path / "start"
    fit(data, start, epochs=2)
    # resume: the log without its final record (3 operations), config.json (3), epoch 3 logged (7),
    # its evaluation logged (8), dies writing last.pt
    assert in_child(lambda: (die_at(9), fit(data, start, resume=True))) == 137
    assert [r["epoch"] for r in records(start) if r["event"] == "epoch"] == [1, 2, 3]
    assert load_checkpoint(start / "last.pt")["epoch"] == 2

    # the resume's own writes: the shortened log (3 operations), config.json (3), epoch 3's log records (2)
    for n in range(1, 9):
        folder = tmp_path / f"killed-{n}"
        shutil.copytree(start, folder)
        assert in_child(lambda: (die_at(n), fit(data, folder, resume=True))) == 137, n
        kept = [r["epoch"] for r in read_log(folder / "log.jsonl") if r["event"] == "epoch"]
        assert kept[:2] == [1, 2]  # history is never lost
        finish(data, folder)
        assert_same_run(folder, reference)
