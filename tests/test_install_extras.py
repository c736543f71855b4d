"""docs/install.md lists every extra of setup.cfg with the packages setup.cfg gives it."""

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_cfg_extras() -> dict:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = config["options.extras_require"]
    # a requirement's name, without its version bound
    return {extra: {re.split(r"[<>=!~ ]", line.strip())[0] for line in extras[extra].split("\n") if line.strip()}
            for extra in extras}  # fmt: skip


def documented_extras() -> dict:
    rows = {}
    for line in (ROOT / "docs" / "install.md").read_text().splitlines():
        match = re.match(r'^\| `pip install [^`]*"\.\[(\w+)\]"` \| ([^|]*) \|', line)
        if match:
            rows[match[1]] = set(re.findall(r"`([^`]+)`", match[2]))
    return rows


def test_every_extra_is_documented_with_its_packages():
    assert documented_extras() == setup_cfg_extras()


def test_the_comparison_reads_the_table():
    # the rows are found: a renamed table would leave nothing to compare
    assert {"test", "docs", "sparse", "tune"} <= set(documented_extras())
    assert "mypy" in documented_extras()["test"]
