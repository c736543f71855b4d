"""The paper's research code and torch_wge side by side, in one run: seconds per
training epoch and per filtered evaluation of the paper's setting.

The research code (https://github.com/vinhsuhi/WGE) is not part of torch_wge:
``--research-code DIR`` is a checkout of it (``git clone``; it needs numpy,
scipy and tqdm beside torch, e.g. installed with ``pip install --target SITE
scipy`` and passed as ``--research-pythonpath SITE``). Its ``main.py`` runs
with the paper's setting (``--lr 0.0005 --beta 0.2 --emb_dim 256``, K = 2,
batch 1024, 1-N BCE, Adam) on a copy of the dataset in its ``data/`` layout;
it prints a line after each epoch, and it validates and tests after epoch 1
only (its ``--eval_after 500``). Its epoch is the time between two epoch lines
from the third epoch on; its evaluations are the times between the lines that
announce them. torch_wge's side is ``bench_speed.py --only wge`` (the same
setting: 64 quaternions, K = 2, batch 1024, beta 0.2, 1-N BCE). Each round
runs both, in fresh processes, the research code first in odd rounds and
torch_wge first in even ones; both see ``--threads`` threads (the research
code through ``OMP_NUM_THREADS``) and the same device: on a GPU machine both
use CUDA (the research code always does where CUDA is available).

Example::

    git clone https://github.com/vinhsuhi/WGE /tmp/wge-research
    pip install --target /tmp/research-site scipy
    python benchmarks/bench_research_code.py --research-code /tmp/wge-research \\
        --research-pythonpath /tmp/research-site --dataset codex-s --threads 2 --rounds 2 \\
        --json benchmarks/records/speed/codex-s/research-code-xeon.json
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from common import DEFAULT_DATA, write_record

HERE = Path(__file__).resolve().parent


def research_epochs(args, workdir: Path) -> Dict[str, object]:
    """Runs the research code for ``2 + args.epochs`` epochs; its epoch seconds (from the third
    epoch on) and the seconds of its validation and test after epoch 1."""
    command = [sys.executable, "-u", "main.py", "--dataset", args.dataset, "--lr", "0.0005", "--beta", "0.2"]
    command += ["--emb_dim", "256", "--num_iterations", str(2 + args.epochs)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    if args.research_pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.research_pythonpath, env.get("PYTHONPATH")]))
    marks: Dict[str, float] = {}
    epoch_lines: List[float] = []
    lines: List[str] = []
    with subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            lines.append(line.rstrip())
            if "Epoch: " in line.split("-->")[0]:  # tqdm's bar may precede it on the line
                epoch_lines.append(now)
            for mark in ("Valid:", "Test:", "Best valid epoch"):
                if line.startswith(mark) and mark not in marks:
                    marks[mark] = now
    if proc.returncode != 0 or len(epoch_lines) < 3 or len(marks) < 3:
        tail = "\n".join(lines[-15:])
        raise SystemExit(f"bench_research_code.py: the research code failed (exit {proc.returncode}):\n{tail}")
    epochs = [b - a for a, b in zip(epoch_lines[1:], epoch_lines[2:])]
    return {
        "epoch_times": epochs,
        "epoch_s": statistics.median(epochs),
        "valid_eval_s": marks["Test:"] - marks["Valid:"],
        "test_eval_s": marks["Best valid epoch"] - marks["Test:"],
    }


def torch_wge_epochs(args, tmp: Path) -> Dict[str, object]:
    """``bench_speed.py --only wge`` of the same setting: its epoch and evaluation seconds."""
    out = tmp / "torch_wge.json"
    command = [sys.executable, str(HERE / "bench_speed.py"), "--only", "wge", "--dataset", args.dataset]
    command += ["--data-dir", str(args.data_dir), "--device", args.device, "--threads", str(args.threads)]
    command += ["--epochs-timed", str(args.epochs), "--eval-repeats", "1", "--json", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    result = json.loads(out.read_text())["results"]["wge"]
    return {key: result[key] for key in ("epoch_s", "epoch_times", "valid_eval_s", "test_eval_s")}


def research_workdir(args, tmp: Path) -> Path:
    """A copy of the research code with the dataset in its ``data/NAME/`` layout."""
    workdir = tmp / "research"
    shutil.copytree(args.research_code, workdir, ignore=shutil.ignore_patterns(".git", "data", "data.zip"))
    data = workdir / "data" / args.dataset
    data.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        source = args.data_dir / args.dataset / f"{split}.txt"
        if not source.is_file():
            raise SystemExit(
                f"bench_research_code.py: no {source}: pass --data-dir, the folder holding {args.dataset}/"
            )
        shutil.copyfile(source, data / f"{split}.txt")
    return workdir


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--research-code", type=Path, required=True, help="a checkout of the research code")
    parser.add_argument("--research-pythonpath", help="extra PYTHONPATH for the research code (its scipy)")
    parser.add_argument("--dataset", default="codex-s")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder holding DATASET/train.txt")
    parser.add_argument(
        "--device", default="cpu", help="torch_wge's device; the research code uses CUDA where there is one"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs a side and round (default: 3)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args(argv)
    if not (args.research_code / "main.py").is_file():
        raise SystemExit(
            f"bench_research_code.py: no {args.research_code / 'main.py'}: --research-code is a checkout of it"
        )
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench_research_code_") as name:
        tmp = Path(name)
        workdir = research_workdir(args, tmp)
        for i in range(args.rounds):
            order = ["research", "torch_wge"] if i % 2 == 0 else ["torch_wge", "research"]
            result = {}
            for side in order:
                result[side] = research_epochs(args, workdir) if side == "research" else torch_wge_epochs(args, tmp)
            rounds.append(result)
            print(
                f"round {i + 1}: epoch {result['research']['epoch_s']:.3f} s (research code) -> "
                f"{result['torch_wge']['epoch_s']:.3f} s (torch_wge)",
                flush=True,
            )
    summary = {
        side: {
            key: statistics.median(r[side][key] for r in rounds) for key in ("epoch_s", "valid_eval_s", "test_eval_s")
        }
        for side in ("research", "torch_wge")
    }
    ratios = {key: summary["research"][key] / summary["torch_wge"][key] for key in summary["research"]}
    for key, ratio in ratios.items():
        print(
            f"{key}: research code {summary['research'][key]:.3f}, torch_wge {summary['torch_wge'][key]:.3f}: {ratio:.2f}x"
        )
    if args.json:
        fields = {"dataset": args.dataset, "threads": args.threads, "rounds": rounds, "median": summary}
        write_record(args.json, "research_code", {**fields, "research_over_torch_wge": ratios})
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
