"""The packages of `app` import one way: no cycles between them, and the domain and the
operations never import a door (the HTTP API, MCP, the command line)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
DOORS = {"app.api", "app.mcp", "app.cli", "app.main"}


def package(module: str) -> str:
    """`app.retrieval.search` -> `app.retrieval`; `app.gate` stays itself."""
    return ".".join(module.split(".")[:2])


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def package_graph() -> dict[str, set[str]]:
    """Each package of `app` and the other packages of `app` it imports."""
    graph: dict[str, set[str]] = {}
    for path in APP.rglob("*.py"):
        parts = path.relative_to(APP.parent).with_suffix("").parts
        source = package(".".join(p for p in parts if p != "__init__"))
        found = {package(m) for m in imports(path) if m.startswith("app.")}
        graph.setdefault(source, set()).update(found - {source})
    return graph


def test_the_packages_import_each_other_without_cycles() -> None:
    try:
        order = list(TopologicalSorter(package_graph()).static_order())
    except CycleError as error:
        raise AssertionError(f"import cycle between packages: {error.args[1]}") from None
    assert "app.operations" in order


def test_no_package_below_the_doors_imports_one() -> None:
    graph = package_graph()
    upward = {
        source: sorted(targets & DOORS)
        for source, targets in graph.items()
        if source not in DOORS and targets & DOORS
    }
    assert upward == {}


def test_mcp_imports_nothing_of_the_http_api() -> None:
    assert "app.api" not in package_graph()["app.mcp"]


# The domain's writes and the tenant transaction: a door reaches them through app/operations.
WRITES = {
    "ingest_document", "ingest_documents", "ingest_stream", "submit_job", "cancel_job",
    "update_document", "delete_document", "write_versions", "erase", "tenant_transaction",
}  # fmt: skip


def door_modules() -> Iterator[Path]:
    for door in sorted(DOORS):
        path = APP.parent / door.replace(".", "/")
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


def test_doors_reach_the_domains_writes_only_through_the_operations() -> None:
    found: dict[str, set[str]] = {}
    for path in door_modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("app."):
                names = {alias.name for alias in node.names} & WRITES
                if names:
                    found.setdefault(str(path.relative_to(APP.parent)), set()).update(names)
    assert found == {}  # every door, the command line's operator commands included
