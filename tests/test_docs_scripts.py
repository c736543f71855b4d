"""The docs' code blocks that PyG's ``torch_geometric.nn.Sequential`` runs in, saved as scripts
and run as a reader would (``python script.py``): ``Sequential`` imports the calling module again,
so a block without an ``if __name__ == "__main__":`` guard would print every line twice."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def sequential_blocks():
    """(page, first line, code) of every ```python block that builds a PyG ``Sequential``."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            if re.search(r"\bSequential\(", match.group(1)):
                found.append((page.name, text.count("\n", 0, match.start()) + 2, match.group(1)))
    return found


def test_the_docs_show_a_sequential_script():
    assert sequential_blocks(), "docs/layers.md shows torch_geometric.nn.Sequential"


@pytest.mark.parametrize("page, line, code", sequential_blocks(), ids=lambda value: str(value)[:20])
def test_a_sequential_block_run_as_a_script_prints_each_line_once(page, line, code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    expected = [comment for comment in re.findall(r"^\s*print\(.*\)\s+# (.*)$", code, re.M)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected, f"{page}, line {line}"
