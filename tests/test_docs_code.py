"""Every ```python block of README.md and of every ``docs/*.md`` page runs as a test.

The blocks of a page run in order, each on its own (a reader may copy any one of them), in a
copy of a workspace that holds small raw files in every layout the pages read (torch_wge's
CoDEx-S, PyG's WordNet18RR, FB15k_237 and RelLinkPredDataset) and a CoDEx-S run made by the
command line. The network is off: a block that tries to download fails the test of a page whose
files the workspace provides (``PAGE_CHECKS``), and skips any other page with a line naming the URL.

A ``print(...)`` whose line ends in a comment must print exactly that comment, every time the
line runs; the ```bash blocks' ``python -m torch_wge`` commands must parse with the CLI's parser
(training commands also as valid settings).
"""

import builtins
import io
import json
import re
import shutil
import sys
import tokenize
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from torch_wge import cli
from torch_wge.testing import random_kg

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WN_RELATIONS = ["_also_see", "_hypernym", "_member_meronym", "_verb_group"]
RELATION_LABELS = {"r0": "zeroth relation", "r2": "second relation"}


def fenced_blocks(page: Path, language: str) -> list[tuple[int, str]]:
    """The page's blocks fenced as ```language, each with the line number of its first line."""
    text = page.read_text()
    return [
        (text.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, re.S | re.M)
    ]


PYTHON_PAGES = [page for page in PAGES if fenced_blocks(page, "python")]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def printed_comments(code: str) -> dict[int, str]:
    """Line number -> trailing comment of each line that is one ``print(...)`` call."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT and token.line.lstrip().startswith("print("):
            comments[token.start[0]] = token.string[1:].strip()
    return comments


def run_block(code: str, filename: str, first_line: int) -> dict:
    """Runs one block as a script; checks what its commented prints print; returns its namespace."""
    printed = defaultdict(list)

    def recording_print(*args, sep=" ", end="\n", file=None, flush=False):
        if file is not None:
            return builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
        text = io.StringIO()
        builtins.print(*args, sep=sep, end=end, file=text)
        frame = sys._getframe(1)
        if frame.f_code.co_filename == filename:
            printed[frame.f_lineno - first_line + 1].append(text.getvalue().rstrip("\n"))
        sys.stdout.write(text.getvalue())

    namespace = {"__name__": "__main__", "print": recording_print}
    # padded so that a traceback names the page's own line numbers
    compiled = compile("\n" * (first_line - 1) + code, filename, "exec")
    try:
        exec(compiled, namespace)
    except (SystemExit, urllib.error.URLError) as error:
        if OFFLINE in str(error):
            raise NeedsDownload(f"{filename}:{first_line}: {error}") from error
        if isinstance(error, SystemExit):
            pytest.fail(f"{filename}:{first_line}: the block exited: {error}", pytrace=False)
        raise
    for line, comment in printed_comments(code).items():
        where = f"{filename}:{first_line + line - 1}"
        assert printed[line], f"{where}: the print never ran"
        for text in printed[line]:
            assert text == comment, f"{where}: prints {text!r}, its comment says {comment!r}"
    return namespace


def write(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(map(str, row)) + "\n" for row in rows))


OFFLINE = "network disabled in the docs test"


class NeedsDownload(Exception):
    """A block tried to download a file the workspace does not provide."""


def refuse_network(url, *args, **kwargs):
    raise urllib.error.URLError(f"{OFFLINE}: {getattr(url, 'full_url', url)}")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Raw files in the formats PyG's and torch_wge's dataset classes read, and a CoDEx-S run."""
    root = tmp_path_factory.mktemp("docs")
    kg = random_kg(24, 4, 160, seed=0)
    triples = torch.stack([kg.edge_index[0], kg.edge_type, kg.edge_index[1]], dim=1)
    splits = {
        name: triples[kg[f"{mask}_mask"]].tolist()
        for name, mask in (("train", "train"), ("valid", "val"), ("test", "test"))
    }
    data = root / "data"
    for name, rows in splits.items():
        named = [(f"e{h}", f"r{r}", f"e{t}") for h, r, t in rows]
        write(data / "codex-s" / "raw" / f"{name}.txt", named)
        write(data / "WN18RR" / "raw" / f"{name}.txt", [(f"e{h}", WN_RELATIONS[r], f"e{t}") for h, r, t in rows])
        write(data / "FB15k-237" / "raw" / f"{name}.txt", named)
        write(data / "RLPD" / "FB15k-237" / "raw" / f"{name}.txt", named)
    write(data / "RLPD" / "FB15k-237" / "raw" / "entities.dict", [(i, f"e{i}") for i in range(24)])
    write(data / "RLPD" / "FB15k-237" / "raw" / "relations.dict", [(i, f"r{i}") for i in range(4)])
    labels = {name: {"label": label} for name, label in RELATION_LABELS.items()}
    (data / "codex-s" / "raw" / "relations.en.json").write_text(json.dumps(labels))
    (data / "codex-s" / "raw" / "entities.en.json").write_text(json.dumps({"e0": {"label": "entity zero"}}))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(urllib.request, "urlopen", refuse_network)
        patch.chdir(root)
        # the run the pages' "runs/codex-s" commands make, one epoch long
        argv = ["train", "--dataset", "codex-s", "--epochs", "1", "--num-layers", "1", "--out", "runs/codex-s"]
        assert cli.main([*argv, "--no-progress"]) == 0
    torch.set_num_threads(threads)
    return root, splits


@pytest.fixture
def offline_copy(workspace, tmp_path, monkeypatch, one_torch_thread):
    """A fresh copy of the workspace as the current folder, with the network off."""
    root, splits = workspace
    folder = tmp_path / "workspace"
    shutil.copytree(root, folder)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(urllib.request, "urlopen", refuse_network)
    return splits


def run_page(page: Path) -> list[dict]:
    """The namespaces of the page's python blocks, run in order."""
    return [run_block(code, page_id(page), line) for line, code in fenced_blocks(page, "python")]


def check_readme(namespaces, out, splits):
    (namespace,) = namespaces
    assert namespace["scores"].shape == (1, 24)  # (entity 0, relation 3, ?) against the 24 entities


def check_layers(namespaces, out, splits):
    assert namespaces[0]["data"].rf_num_nodes == 24 + 2 * 4  # entities, relations and their inverses


def check_pyg_datasets(namespaces, out, splits):
    views, training = namespaces
    # inverses added once; WordNet18RR numbers its relations by name: ids 0, 3, 5 and 10, so R = 11
    for name, num_relations in (("wn18rr", 11), ("fb15k237", 4), ("rlpd", 4)):
        data = views[name]
        assert data.num_nodes == 24 and data.rf_num_nodes == 24 + 2 * num_relations, name
    num_train = len(splits["train"])
    assert int(views["wn18rr"].train_mask.sum()) == int(views["fb15k237"].train_mask.sum()) == num_train
    assert views["evaluator"].num_queries == 2 * len(splits["test"])
    assert "4 8\n" in out  # R and 2R of the RelLinkPredDataset layout
    assert len(training["top"]) == 5


def check_evaluation(namespaces, out, splits, capsys):
    # the block prints what `torch-wge evaluate --per-relation` prints, labels included
    assert cli.main(["evaluate", "runs/codex-s/best.pt", "--split", "valid", "--per-relation"]) == 0
    assert capsys.readouterr().out == out
    assert "\nr2 (second relation)  both" in out and "\nr1  " in out  # a label where there is one, else the id


def check_kge(namespaces, out, splits):
    assert namespaces[0]["results"]["both.mrr"] > 0.5  # also asserted in the block


PAGE_CHECKS = {
    "README.md": check_readme,
    "layers.md": check_layers,
    "pyg_datasets.md": check_pyg_datasets,
    "evaluation.md": check_evaluation,
    "kge.md": check_kge,
}


def test_the_pages_with_code_are_known():
    assert {page.name for page in PYTHON_PAGES} >= set(PAGE_CHECKS)
    assert sum(len(fenced_blocks(page, "python")) for page in PYTHON_PAGES) >= 8


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=page_id)
def test_python_blocks_run(page, offline_copy, capsys):
    try:
        namespaces = run_page(page)
    except NeedsDownload as error:
        # the workspace must hold every file the pages checked here read; a new page whose
        # block downloads what it lacks is skipped, saying so, until its files are added
        if page.name in PAGE_CHECKS:
            pytest.fail(f"needs a download: {error}", pytrace=False)
        print(f"skipped, needs a download: {error}")
        pytest.skip(f"needs a download: {error}")
    out = capsys.readouterr().out
    check = PAGE_CHECKS.get(page.name)
    if check is check_evaluation:
        check(namespaces, out, offline_copy, capsys)
    elif check is not None:
        check(namespaces, out, offline_copy)


def test_pyg_dataset_blocks_offline_end_in_one_line(tmp_path, monkeypatch):
    # without the raw files and without a network: one line saying what to do, not a URLError traceback
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(urllib.request, "urlopen", refuse_network)
    for line, code in fenced_blocks(ROOT / "docs" / "pyg_datasets.md", "python"):
        with pytest.raises(SystemExit) as exited:
            exec(compile(code, "pyg_datasets.md", "exec"), {"__name__": "__main__"})
        message = str(exited.value)
        assert message.startswith("cannot download") and "place its raw files by hand" in message, line
        assert "\n" not in message and exited.value.__suppress_context__


def test_printed_comments_are_checked():
    # the rule itself: a commented print that prints something else fails, naming the line
    with pytest.raises(AssertionError, match=r"page.md:11: prints '3', its comment says '4'"):
        run_block("x = 3\nprint(x)  # 4\n", "page.md", 10)
    assert printed_comments("print('#')  # #\ny = 1  # not a print\n") == {1: "#"}


def test_a_download_is_reported(monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", refuse_network)
    code = "import urllib.request\nurllib.request.urlopen('https://example.org/raw.txt')\n"
    with pytest.raises(NeedsDownload, match=f"page.md:3: .*{OFFLINE}: https://example.org/raw.txt"):
        run_block(code, "page.md", 3)


def torch_wge_commands() -> list[tuple[str, list[str]]]:
    """Every ``torch-wge``, ``python -m torch_wge`` and ``torchrun ... -m torch_wge`` command of the
    pages' bash blocks, a command continued over lines (``\\``) joined, ``&&`` chains split, a
    background ``&`` dropped."""
    commands = []
    for page in PAGES:
        for line_number, block in fenced_blocks(page, "bash"):
            lines = block.splitlines()
            start = 0
            while start < len(lines):
                end = start
                while lines[end].rstrip().endswith("\\") and end + 1 < len(lines):
                    end += 1
                text = " ".join(line.split("#")[0].rstrip().rstrip("\\") for line in lines[start : end + 1])
                for command in text.split("&&"):
                    words = command.removesuffix("&").split()  # a command sent to the background
                    if "torch-wge" in words:
                        arguments = words[words.index("torch-wge") + 1 :]
                    elif "torch_wge" in words and words[words.index("torch_wge") - 1] == "-m":
                        arguments = words[words.index("torch_wge") + 1 :]
                    else:
                        continue
                    commands.append((f"{page_id(page)}:{line_number + start}", arguments))
                start = end + 1
    return commands


def test_shell_commands_parse():
    # training runs of minutes to hours: each is parsed as the CLI parses it and a training
    # command's settings checked, so that a renamed option or a bad value in a page fails here
    commands = torch_wge_commands()
    assert len(commands) >= 15 and any("large" in argv for _, argv in commands)
    parser = cli.build_parser()
    for where, argv in commands:
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{where}: torch_wge {' '.join(argv)} does not parse", pytrace=False)
        for word in argv:  # the repository's example files that a command names exist
            if word.startswith("examples/"):
                assert (ROOT / word).is_file(), f"{where}: {word} is not in the repository"
        made_earlier = getattr(args, "config", None) and not (ROOT / args.config).is_file()
        if args.command == "train" and not made_earlier:  # a --config an earlier command writes: parsed only
            config = cli.config_from_args(args)  # validated: raises on a bad value
            if "--recipe" in argv:
                assert config.recipe == argv[argv.index("--recipe") + 1], where


def test_readme_is_short_and_its_test_command_is_the_ci_one():
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 150
    # .ci/run's steps from installing torch to the test run, one line each, as one command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    steps = ci[ci.index("pip install torch==2.13.0") : ci.index('python -m pytest -m "slow or not slow" -q') + 1]
    command = " && ".join(["python -m venv .venv", ". .venv/bin/activate", *steps])
    for page in (readme, ROOT / "docs" / "install.md"):
        assert command in [block.strip() for _, block in fenced_blocks(page, "bash")], page_id(page)
