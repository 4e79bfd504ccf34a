"""Run `rag` (or an import) in a subprocess and see which modules it imported."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass

HEAVY = ("torch", "sentence_transformers", "sqlalchemy", "asyncpg", "app.db", "app.embeddings")


@dataclass(frozen=True, slots=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    modules: frozenset[str]

    def heavy(self) -> list[str]:
        return sorted(m for m in self.modules if m.split(".")[0] in HEAVY or m in HEAVY)


def run_rag(*args: str, env: dict[str, str], timeout: float = 120) -> Run:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "app.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    modules = frozenset(re.findall(r"^import time:.*\|\s+([\w.]+)$", done.stderr, re.MULTILINE))
    stderr = "\n".join(
        line for line in done.stderr.splitlines() if not line.startswith("import time:")
    )
    return Run(done.returncode, done.stdout, stderr, modules)


def packages_imported_by(*modules: str) -> frozenset[str]:
    """The top-level packages a fresh interpreter holds after importing `modules`."""
    probe = (
        f"import sys, {', '.join(modules)}; "
        "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return frozenset(done.stdout.split())
