"""The package's floors hold: data flows one way, from configuration to effects (DESIGN §1).

The imports of every module are read from its source (``ast``; imports under ``TYPE_CHECKING``
count too, since they name what a module depends on), folded to packages (``_core``,
``_engine``, ``_protect``...), and checked: the pure vocabulary imports nothing else from
retrymw, the runtime stays below the front doors, and no two packages import each other.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import retrymw

PACKAGE = Path(retrymw.__file__).parent


def _package_of(module: str) -> str:
    """The package of ``module``: ``retrymw._engine.run`` -> ``_engine``, the root -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports() -> dict[str, set[str]]:
    """Package -> the other packages its modules import."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(relative.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        module = ".".join(parts)
        source = _package_of(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = parts if is_package else parts[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    names = [".".join([*base, node.module] if node.module else base)]
                else:
                    names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "retrymw" and _package_of(name) != source:
                    graph[source].add(_package_of(name))
    return graph


def test_the_vocabulary_imports_nothing_else_from_retrymw() -> None:
    """``_core`` (durations, backoff, matchers, policy, events, errors, clock) is the ground."""
    assert _imports()["_core"] == set()


def test_protection_builds_on_the_vocabulary_alone() -> None:
    assert _imports()["_protect"] <= {"_core"}


def test_the_engine_sits_below_the_front_doors() -> None:
    """The runtime drives protection, instruments and stores, and knows no front door."""
    assert _imports()["_engine"] <= {"_core", "_protect", "instrumentation", "stores", "fleet"}


def test_no_two_packages_import_each_other() -> None:
    """The package graph has no circle: every import runs down."""
    graph = _imports()
    finished: set[str] = set()

    def visit(package: str, path: tuple[str, ...]) -> None:
        assert package not in path, " -> ".join([*path, package])
        if package in finished:
            return
        for imported in sorted(graph.get(package, ())):
            visit(imported, (*path, package))
        finished.add(package)

    for package in sorted(graph):
        visit(package, ())
