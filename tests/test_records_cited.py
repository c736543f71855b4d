"""Every record that ``benchmarks/RESULTS.md`` or ``README.md`` cites exists: a path under
``benchmarks/records`` named in either (``records/...`` in RESULTS, ``benchmarks/records/...``
anywhere; a ``*`` stands for any run of a family, such as a run's seeds) is a file or folder there."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "benchmarks" / "records"
PAGES = [ROOT / "benchmarks" / "RESULTS.md", ROOT / "README.md"]
#: a records path as the pages write it: in a link, in backticks, or in a command
CITED = re.compile(r"(?<![\w/.-])(?:benchmarks/)?records/([\w.*-]+(?:/[\w.*-]+)*)")


def cited(text: str) -> list[str]:
    """The paths under ``benchmarks/records`` that ``text`` names (trailing punctuation left out)."""
    return sorted({match.group(1).rstrip(".-") for match in CITED.finditer(text)})


def test_the_pattern_finds_the_ways_a_page_cites_a_record():
    text = (
        "[`codex-s/wge/paper-3000ep`](records/codex-s/wge/paper-3000ep), `records/tune/x/trials.json`.\n"
        "--json benchmarks/records/speed/a.json; records `records/codex-s/wge/fast-500ep-seed*`; "
        "see records/INDEX.md. runs/records/x is no record, nor --records DIR"
    )
    assert cited(text) == [
        "INDEX.md",
        "codex-s/wge/fast-500ep-seed*",
        "codex-s/wge/paper-3000ep",
        "speed/a.json",
        "tune/x/trials.json",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_cited_record_exists(page):
    paths = cited(page.read_text())
    assert paths, f"{page.name} cites no record"
    missing = [path for path in paths if not any(RECORDS.glob(path))]
    assert not missing, f"{page.name} cites records that are not under benchmarks/records: {missing}"
