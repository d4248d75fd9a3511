"""No engine module names a module of a layer above it, not even in a string: an import by name
(`importlib.import_module("loopproof.engine.admission.revision")`) is a dependency the import
contracts of pyproject.toml cannot see (the run layer once found the revision kind that way).
A higher layer registers into a lower one instead (engine/kinds.py)."""

from __future__ import annotations

import ast
import tomllib

from tests.support.paths import REPO


def engine_layers() -> list[set[str]]:
    """The engine contract's layers, top first, as sets of folder/module names."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "engine"]
    return [{part.strip() for part in layer.split("|")} for layer in contract["layers"]]


def named_above(rel: str, text: str, layers: list[set[str]]) -> list[str]:
    """The strings of engine module `rel` (its source `text`) that name a higher layer."""
    own = rel.split("/")[1].removesuffix(".py")
    level = next(i for i, layer in enumerate(layers) if own in layer)
    above = {name for layer in layers[:level] for name in layer}
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for name in above:
                if f"loopproof.engine.{name}." in node.value + "." and \
                        node.value.startswith(f"loopproof.engine.{name}"):
                    found.append(f"{rel}: {node.value!r}")
    return found


def test_no_engine_module_names_a_higher_layer_by_string() -> None:
    layers = engine_layers()
    found = []
    for path in sorted((REPO / "engine").rglob("*.py")):
        parts = path.relative_to(REPO / "engine").parts
        if len(parts) == 1 and parts[0] in ("__init__.py", "cli.py"):
            continue  # the CLI dispatches to its subcommands by name: the top layer itself
        if any(parts[0].removesuffix(".py") in layer for layer in layers):
            found += named_above(str(path.relative_to(REPO)), path.read_text(encoding="utf-8"),
                                 layers)
    assert found == [], found


def test_the_check_finds_the_old_string_import() -> None:
    old = 'KIND_MODULES = {"revision": "loopproof.engine.admission.revision"}\n'
    assert named_above("engine/run/kinds.py", old, engine_layers()) == [
        "engine/run/kinds.py: 'loopproof.engine.admission.revision'"]
