"""The black-box suite sees the service only through HTTP and its command line: no module of
it, nor any module of this repository it imports, may import `app` (or `rag_client`, whose
models would hide a change of the wire format)."""

from __future__ import annotations

import ast
from pathlib import Path

SUITE = Path(__file__).resolve().parent
ROOT = SUITE.parents[1]
FORBIDDEN = ("app", "rag_client")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            base = ".".join(path.relative_to(ROOT).with_suffix("").parts[: -node.level])
            names.add(f"{base}.{node.module}" if node.module else base)
    return names


def local_file(module: str) -> Path | None:
    """The repository's own file for `module` (tests.processes, …), or None for a library."""
    candidate = ROOT.joinpath(*module.split("."))
    for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if path.is_file():
            return path
    return None


def reachable_files() -> dict[Path, set[str]]:
    """Every repository file the suite imports, directly or through another one."""
    pending = sorted(SUITE.glob("*.py"))
    seen: dict[Path, set[str]] = {}
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen[path] = imported_modules(path)
        for module in seen[path]:
            found = local_file(module)
            if found is not None and not module.startswith(FORBIDDEN):
                pending.append(found)
    return seen


def forbidden(module: str) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in FORBIDDEN)


def test_the_suite_imports_nothing_from_the_service() -> None:
    files = reachable_files()
    assert SUITE / "target.py" in files
    assert ROOT / "tests" / "processes.py" in files  # followed into the shared helpers
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in modules if forbidden(m))
        for path, modules in files.items()
        if any(forbidden(m) for m in modules)
    }
    assert offenders == {}


def test_the_scan_sees_every_import_form(tmp_path: Path) -> None:
    source = (
        "import app.main\n"
        "from app.settings import Settings\n"
        "import rag_client as rc\n"
        "def later():\n"
        "    from app import gate\n"
    )
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    found = {m for m in imported_modules(probe) if forbidden(m)}
    assert found == {"app.main", "app.settings", "rag_client", "app"}
