"""Tables on stdout, JSON results in bench/results/, progress on stderr."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.kit.paths import RESULTS, ROOT


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in header], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = [title, ""]
    for index, row in enumerate(cells):
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    sys.stdout.write("\n".join(out) + "\n\n")
    sys.stdout.flush()


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    payload = {"benchmark": name, "finished_at": stamp, "machine": machine_note(), **payload}
    path = RESULTS / f"{name}-{stamp}.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    (RESULTS / f"{name}-latest.json").write_text(path.read_text())
    return path


def machine_note() -> dict[str, object]:
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "loadavg_at_end": [round(x, 2) for x in load],
        "commit": git_commit(),
    }


def git_commit() -> str:
    """The code measured: HEAD, plus "+dirty" when app/ or migrations/ differ from it."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--", "app", "migrations")
    return head + ("+dirty" if dirty else "")


def log(message: str) -> None:
    sys.stderr.write(f"[{datetime.now().strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()
