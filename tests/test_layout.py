"""The layout's dependency rule (ADR 21), checked on the source: imports point down.

`ontology` imports nothing of ours; `connectors` imports `ontology` and itself, never `uda`;
`uda` may import both. Inside the three packages no runtime import cycle exists (an import
under `if TYPE_CHECKING:` is not a runtime import; a module importing its own package's
`__init__` is not a cycle). Every import counts: at module level, inside a function, and under
`TYPE_CHECKING` for the layering rule, since a type-only upward import is still an upward
dependency.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

REPOSITORY = Path(__file__).parents[1]
LAYERS = ("ontology", "connectors", "uda")  # lowest first: each may import only those before it


@dataclass(frozen=True, kw_only=True)
class Import:
    importer: str
    imported: str
    line: int
    type_only: bool


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = REPOSITORY) -> dict[str, Path]:
    return {
        _module_name(path, root): path
        for layer in LAYERS
        for path in sorted((root / layer).rglob("*.py"))
    }


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(modules: dict[str, Path]) -> list[Import]:
    """Every import of a project module, resolved to the module it loads."""
    found: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_only = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                submodules = [f"{node.module}.{alias.name}" for alias in node.names]
                targets = [t for t in submodules if t in modules] or [node.module]
            else:
                continue
            for target in targets:
                if target.split(".")[0] in LAYERS:
                    found.append(
                        Import(
                            importer=name,
                            imported=target,
                            line=node.lineno,
                            type_only=node.lineno in type_only,
                        )
                    )
    return found


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return _imports(_modules())


def test_the_scan_sees_every_layer(imports: list[Import]) -> None:
    # A scan that reads nothing would pass every rule below.
    importers = {i.importer.split(".")[0] for i in imports}
    assert importers == set(LAYERS)
    assert any(i.importer.startswith("connectors.") and i.type_only for i in imports)


def _upward(imports: list[Import], layer: str) -> list[str]:
    allowed = set(LAYERS[: LAYERS.index(layer) + 1])
    return [
        f"{i.importer}:{i.line} imports {i.imported}"
        for i in imports
        if i.importer.split(".")[0] == layer and i.imported.split(".")[0] not in allowed
    ]


def _runtime_cycles(imports: list[Import]) -> list[list[str]]:
    graph: nx.DiGraph[str] = nx.DiGraph()
    for i in imports:
        own_package = i.importer.startswith(i.imported + ".")
        if not i.type_only and not own_package and i.importer != i.imported:
            graph.add_edge(i.importer, i.imported)
    return sorted(sorted(cycle) for cycle in nx.simple_cycles(graph))


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_point_down(imports: list[Import], layer: str) -> None:
    assert _upward(imports, layer) == [], f"{layer} imports a layer above it"


def test_no_runtime_import_cycles(imports: list[Import]) -> None:
    assert _runtime_cycles(imports) == []


def test_the_checks_catch_what_they_forbid(tmp_path: Path) -> None:
    """The checker itself, on a small tree that breaks each rule once."""
    files = {
        "ontology/__init__.py": "",
        "connectors/__init__.py": "",
        "connectors/leaky.py": "def f():\n    from uda.errors import UserError\n",
        "uda/__init__.py": "",
        "uda/errors.py": "",
        "uda/a.py": "import uda.b\n",
        "uda/b.py": "from uda import a\n",
        "uda/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import uda.a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    found = _imports(_modules(tmp_path))
    assert _upward(found, "connectors") == ["connectors.leaky:2 imports uda.errors"]
    assert _upward(found, "ontology") == []
    assert _runtime_cycles(found) == [["uda.a", "uda.b"]]


def test_the_old_records_address_still_works_and_says_where_it_went() -> None:
    import importlib
    import sys

    import connectors.contract.records as records

    sys.modules.pop("connectors.records", None)
    with pytest.warns(DeprecationWarning, match=r"connectors\.contract\.records"):
        old = importlib.import_module("connectors.records")
    assert old.ChunkRecord is records.ChunkRecord
    assert old.walks_back is records.walks_back


@pytest.mark.parametrize(
    ("package", "name"),
    [
        ("connectors.chroma", "ChromaConnector"),
        ("connectors.sqlite", "SQLiteConnector"),
        ("connectors.postgres", "PostgresConnector"),
        ("connectors.arcadedb", "ArcadeDBConnector"),
        ("connectors.arcadedb", "ArcadeDBGraphConnector"),
    ],
)
def test_each_backend_package_names_its_connector(package: str, name: str) -> None:
    """`from connectors.chroma import ChromaConnector` works as it did before the packages."""
    import importlib

    from connectors.registry import BUILTIN

    cls = getattr(importlib.import_module(package), name)
    registered = {target for target, _ in BUILTIN.values()}
    assert f"{cls.__module__}:{name}" in registered


def test_a_row_reader_that_drifts_from_its_columns_fails() -> None:
    """The spelled-out row readers are held to the one column definition at import."""
    from connectors.contract import system_of_record as rows

    def swapped(row: Any) -> object:
        values = list(row)
        values[2], values[3] = values[3], values[2]
        return rows.state_from_row(values)

    rows._check_reader(rows.state_from_row, rows._STATE_FIELDS)  # the real one passes
    rows._check_reader(rows.head_from_row, rows._HEAD_FIELDS)
    with pytest.raises(TypeError, match="wrong field"):
        rows._check_reader(swapped, rows._STATE_FIELDS)
