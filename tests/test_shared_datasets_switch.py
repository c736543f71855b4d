"""Real-data tests read $TORCH_WGE_SHARED_DATASETS: skipped with one line when it
is absent, failed when CI=true."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("ci", ["", "true"])
def test_absent_real_data_skips_or_fails_under_ci(ci, tmp_path):
    env = {**os.environ, "TORCH_WGE_SHARED_DATASETS": str(tmp_path / "absent"), "CI": ci}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "slow or not slow",
            "tests/training/test_codex_integration.py",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    message = f"real benchmark data not found at {tmp_path / 'absent'}"
    if ci:
        assert run.returncode != 0 and "1 error" in run.stdout and message in run.stdout
    else:
        assert run.returncode == 0 and "1 skipped" in run.stdout
        assert sum(message in line for line in run.stdout.splitlines()) == 1
