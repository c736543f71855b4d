"""The README's figures for its main command: the seeds' test MRRs of the records, and what seed 0
gives on the machine they came from and, within the seeds' range, on another."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_says_what_seed_0_gives_here_and_on_another_machine():
    readme = " ".join((ROOT / "README.md").read_text().split())
    seeds = re.search(r"test MRR (0\.\d{3}) / (0\.\d{3}) / (0\.\d{3}) for seeds 0 / 1 / 2", readme)
    assert seeds, "the main command's figures for seeds 0 / 1 / 2"
    figures = [float(value) for value in seeds.groups()]
    sentence = readme[seeds.end() : seeds.end() + 1000]
    assert "the machine the records came from" in sentence
    assert f"seed 0 gives {figures[0]:.3f} there" in sentence
    assert "Another machine" in sentence
    assert f"about the seeds' range, {min(figures):.3f}-{max(figures):.3f}" in sentence
    # and what this release's seed 0 gave, as its record has it
    quoted = re.search(r"seed 0 is another sample again: (0\.\d{3}) .*?`(benchmarks/records/[^`]+)`", sentence)
    assert quoted, "this release's seed 0 and its record"
    record = json.loads((ROOT / quoted.group(2)).read_text())
    assert f"{record['test']['mrr']:.3f}" == quoted.group(1)
    # the figures are those of the records' table in benchmarks/RESULTS.md
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    row = next(
        line for line in results.splitlines() if line.startswith("| CoDEx-S | WGE | fast, seeds 0 / 1 / 2 | 500")
    )
    test_mrr = [float(value) for value in re.sub(r"\*", "", row.split("|")[6]).split(" / ")]
    assert [round(value, 3) for value in test_mrr] == figures
