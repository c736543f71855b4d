"""Start-up time of the command line: ``torch-wge --help`` and ``torch-wge train
--help``, each in fresh processes (``python -m torch_wge`` of this checkout),
beside the bare interpreter and ``import torch`` for scale.

Each command runs once to warm the file cache, then ``--repeat`` times; the
median and the minimum wall time are reported. The load average before and
after is recorded with them: on a machine busy with other work the times are
longer than a user's, and only the minimum is a fair figure.

Example::

    python benchmarks/bench_cli_startup.py --repeat 7 --json benchmarks/records/cli-startup/<commit>.json
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_speed import cpu_model, git_state

CHECKOUT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import torch'": ["-c", "import torch"],
    "torch-wge --help": ["-m", "torch_wge", "--help"],
    "torch-wge train --help": ["-m", "torch_wge", "train", "--help"],
}


def wall_seconds(argv, env) -> float:
    """Wall time of one fresh ``python argv`` process, which must succeed."""
    tic = time.perf_counter()
    subprocess.run([sys.executable, *argv], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - tic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of each command (default: 7)")
    parser.add_argument("--json", default=None, help="write the record to this file")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    load_before = os.getloadavg()
    results = []
    for name, argv in COMMANDS.items():
        wall_seconds(argv, env)  # warm-up
        times = [wall_seconds(argv, env) for _ in range(args.repeat)]
        results.append({"command": name, "median_s": statistics.median(times), "min_s": min(times), "times_s": times})
        print(f"{name:<28} median {statistics.median(times):6.3f} s   min {min(times):6.3f} s")
    record = {
        "command": "python benchmarks/bench_cli_startup.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "git": git_state(),
        "results": results,
    }
    if args.json:
        from torch_wge import io

        io.write_json(args.json, record)
    else:
        print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
