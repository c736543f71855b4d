"""The import layering stated in ARCHITECTURE.md holds: every ``torch_wge`` import of every module
(at module level or inside a function) stays inside its own layer or goes to a layer the table
names, and each layer names only layers listed above it (so they have no cycle)."""

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "torch_wge"
ROW = re.compile(r"^\| `([\w.]+)` \|([^|]*)\|$")


def stated_layers(text: str) -> Dict[str, Set[str]]:
    """The table under ``## Layers``: each layer with the layers it may import."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers = {}
    for line in section.splitlines():
        match = ROW.match(line.strip())
        if match:
            layers[match.group(1)] = set(re.findall(r"`([\w.]+)`", match.group(2)))
    return layers


LAYERS = stated_layers((ROOT / "ARCHITECTURE.md").read_text())


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, root: Path = ROOT) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(path: Path, root: Path = ROOT) -> Iterator[str]:
    """Every module the file imports, wherever in the file the import stands."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:  # ``from torch_wge import io`` imports the module torch_wge.io
                yield f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}", root) else base


def layer_of(module: str) -> str:
    """The longest stated layer naming the module or a package holding it ('' for the package root)."""
    parts = module.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return ".".join(parts[:end])
    return ""


MODULES = sorted(module_name(path) for path in PACKAGE.rglob("*.py"))


def test_table_is_read_and_names_only_stated_layers():
    assert {"io", "utils", "nn.models", "nn.kge", "training", "cli"} <= set(LAYERS)
    assert LAYERS["nn.kge"] >= {"nn.models"} and "nn.kge" not in LAYERS["nn.models"]
    for layer, allowed in LAYERS.items():
        assert allowed <= set(LAYERS), f"{layer} names unknown layers {allowed - set(LAYERS)}"


def test_every_module_belongs_to_a_layer():
    assert [module for module in MODULES if module != "torch_wge" and not layer_of(module)] == []


def test_each_layer_names_only_layers_above_it():
    """Listed from the bottom up, so that the stated layers have no cycle."""
    order = list(LAYERS)
    for position, (layer, allowed) in enumerate(LAYERS.items()):
        assert allowed <= set(order[:position]), f"{layer} names {allowed - set(order[:position])}, not above it"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda path: module_name(path))
def test_imports_stay_inside_the_stated_layers(path):
    layer = layer_of(module_name(path))
    crossing = sorted(
        target
        for target in set(imported_modules(path))
        if target.split(".")[0] == "torch_wge"
        and target != "torch_wge"
        and layer_of(target) != layer
        and layer_of(target) not in LAYERS.get(layer, set())
    )
    assert crossing == [], f"{module_name(path)} ({layer}) imports {crossing} across ARCHITECTURE.md's layers"


def test_the_check_sees_function_level_relative_and_package_imports(tmp_path):
    package = tmp_path / "torch_wge"
    (package / "utils").mkdir(parents=True)
    (package / "io.py").write_text("")
    source = package / "utils" / "late.py"
    source.write_text(
        "import math\nfrom torch_wge import io, __version__\nfrom ..data import kg_triples\n\n"
        "def f():\n    from torch_wge.training import Trainer\n"
    )
    found = set(imported_modules(source, tmp_path))
    assert found == {"math", "torch_wge.io", "torch_wge", "torch_wge.data", "torch_wge.training"}
    assert layer_of("torch_wge.training") not in LAYERS["utils"]
