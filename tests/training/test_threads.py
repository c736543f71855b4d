"""The default thread count is PyTorch's, capped at the CPU affinity, whatever the load; the
command line says in one line when the load average leaves fewer free cores than it uses."""

import os
from pathlib import Path

import pytest
import torch

import torch_wge
from torch_wge.training import threads
from torch_wge.utils.devices import has_native_bf16


@pytest.fixture
def restored_threads():
    count = torch.get_num_threads()
    yield
    torch.set_num_threads(count)


def test_the_default_does_not_follow_the_load_average(monkeypatch, restored_threads):
    torch.set_num_threads(2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0), raising=False)
    idle = threads.default_threads()
    assert idle == min(2, len(os.sched_getaffinity(0)))
    monkeypatch.setattr(os, "getloadavg", lambda: (1e6, 1e6, 1e6), raising=False)
    assert threads.default_threads() == idle
    assert threads.set_threads() == idle == torch.get_num_threads()
    assert threads.set_threads(1) == 1 == torch.get_num_threads()
    with pytest.raises(ValueError, match="--threads must be between 1 and"):
        threads.set_threads(0)


def test_the_default_is_capped_at_the_cpu_affinity(monkeypatch, restored_threads):
    torch.set_num_threads(2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert threads.available_cores() == 1 and threads.set_threads() == 1


def test_no_module_of_the_package_reads_the_load_average():
    package = Path(torch_wge.__file__).parent
    readers = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if "getloadavg" in path.read_text(encoding="utf-8")
    ]
    assert readers == []


def test_train_says_how_many_threads_it_uses(kg_folder, tmp_path, monkeypatch, capsys, restored_threads):
    from torch_wge.cli import main

    torch.set_num_threads(2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1e6, 1e6, 1e6), raising=False)  # read by nothing
    argv = ["train", "--dataset", str(kg_folder), "--root", str(tmp_path / "data"), "--epochs", "1"]
    argv += ["--hidden-channels", "2", "--num-layers", "1", "--device", "cpu"]

    def thread_lines(out: str, *options: str) -> list:
        assert main(argv + ["--out", str(tmp_path / out), *options]) == 0
        return [line for line in capsys.readouterr().err.splitlines() if "CPU thread(s)" in line]

    auto = "bf16" if has_native_bf16("cpu") else "float32"
    settings = f"(--threads to change), precision {auto} (auto) (--precision to change)"
    assert thread_lines("default") == [f"torch-wge: 2 CPU thread(s) {settings}"]
    assert thread_lines("float32", "--precision", "float32") == [
        "torch-wge: 2 CPU thread(s) (--threads to change), precision float32 (--precision to change)"
    ]
    assert thread_lines("given", "--threads", "1") == [f"torch-wge: 1 CPU thread(s) {settings}"]
    assert thread_lines("quiet", "--no-progress") == []
