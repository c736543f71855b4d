"""The README's Python snippets, run in order as a reader would, each on its own (no
block reads a variable of another): in an empty folder holding PyG's raw files of a
small knowledge graph (no network) and a CoDEx-S run made by the README's command line."""

import re
from pathlib import Path

import pytest
import torch

from torch_wge import cli
from torch_wge.testing import random_kg

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
WN_RELATIONS = ["_also_see", "_hypernym", "_member_meronym", "_verb_group"]


def write(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(map(str, row)) + "\n" for row in rows))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Raw files in the formats PyG's and torch_wge's dataset classes read."""
    root = tmp_path_factory.mktemp("readme")
    kg = random_kg(24, 4, 160, seed=0)
    triples = torch.stack([kg.edge_index[0], kg.edge_type, kg.edge_index[1]], dim=1)
    splits = {
        name: triples[kg[f"{mask}_mask"]].tolist()
        for name, mask in (("train", "train"), ("valid", "val"), ("test", "test"))
    }
    for name, rows in splits.items():
        named = [(f"e{h}", f"r{r}", f"e{t}") for h, r, t in rows]
        write(root / "data" / "codex-s" / "raw" / f"{name}.txt", named)
        write(
            root / "data" / "WN18RR" / "raw" / f"{name}.txt", [(f"e{h}", WN_RELATIONS[r], f"e{t}") for h, r, t in rows]
        )
        write(root / "data" / "FB15k-237" / "raw" / f"{name}.txt", named)
        write(root / "data" / "RLPD" / "FB15k-237" / "raw" / f"{name}.txt", named)
    write(root / "data" / "RLPD" / "FB15k-237" / "raw" / "entities.dict", [(i, f"e{i}") for i in range(24)])
    write(root / "data" / "RLPD" / "FB15k-237" / "raw" / "relations.dict", [(i, f"r{i}") for i in range(4)])
    return root, splits


def test_readme_has_the_snippets():
    assert len(BLOCKS) == 7
    assert any("RelLinkPredDataset" in block for block in BLOCKS)
    assert any("TwoViewConv(8, 16)" in block for block in BLOCKS)
    assert any("ComplEx" in block for block in BLOCKS)


def test_readme_python_snippets_run(workspace, monkeypatch, capsys, one_torch_thread):
    root, splits = workspace
    monkeypatch.chdir(root)
    # the README's command line, as its "evaluate" snippet assumes
    assert (
        cli.main(
            [
                "train",
                "--dataset",
                "codex-s",
                "--epochs",
                "1",
                "--hidden-channels",
                "2",
                "--num-layers",
                "1",
                "--out",
                "runs/codex-s",
                "--no-progress",
            ]
        )
        == 0
    )
    namespace = {}
    for block in BLOCKS:
        own = {}  # each block runs on its own: a reader may copy any one of them
        exec(compile(block, str(README), "exec"), own)
        namespace.update(own)

    num_train = len(splits["train"])
    # inverses added once; WordNet18RR numbers its relations by name: ids 0, 3, 5 and 10, so R = 11
    for name, num_relations in (("wn18rr", 11), ("fb15k237", 4), ("rlpd", 4)):
        data = namespace[name]
        assert data.num_nodes == 24 and data.rf_num_nodes == 24 + 2 * num_relations, name
    assert int(namespace["wn18rr"].train_mask.sum()) == int(namespace["fb15k237"].train_mask.sum()) == num_train
    assert namespace["evaluator"].num_queries == 2 * len(splits["test"])
    assert len(namespace["top"]) == 5
    out = capsys.readouterr().out
    assert "4 8\n" in out  # R and 2R of the RelLinkPredDataset layout
    # TwoViewConv in a Sequential; its propagate hook sees the relation-focused view, then the entity-focused one
    assert "torch.Size([3, 1]) [torch.Size([5, 16]), torch.Size([3, 16])]" in out
    assert "torch.Size([45, 8]) torch.Size([12, 8])" in out  # a batch of three graphs through TwoViewEncoder
    # ComplEx on the ring: each test triple's inverse is a training triple; a random order gives about 0.13
    assert float(re.search(r"filtered test MRR ([0-9.]+)", out).group(1)) > 0.5


def readme_train_commands():
    """The options of every ``python -m torch_wge train`` line of the README's shell blocks."""
    shell = "".join(re.findall(r"```bash\n(.*?)```", README.read_text(), re.S))
    lines = [line.split("#")[0].split() for line in shell.splitlines()]
    return [
        line[line.index("train") + 1 :]
        for line in lines
        if line[:3] == ["python", "-m", "torch_wge"] and "train" in line
    ]


def test_readme_train_commands_are_valid_settings():
    # training runs of minutes to hours: each is parsed as the CLI parses it and its settings
    # checked, so that a renamed option or a bad value in the README fails here
    commands = readme_train_commands()
    assert len(commands) >= 5 and any("large" in command for command in commands)
    for argv in commands:
        args = cli.build_parser().parse_args(["train", *argv])
        config = cli.config_from_args(args)  # validated: raises on a bad value
        if "--recipe" in argv:
            assert config.recipe == argv[argv.index("--recipe") + 1]
