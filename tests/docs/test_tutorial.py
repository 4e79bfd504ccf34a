"""The README's tutorial, run as written against a fresh `rag serve`, so it cannot rot.

Each ```console block of the tutorial section is a shell session: a `$ ` line is a command
(continued over the next lines while its quotes or a trailing backslash are open), the lines
after it are what it prints. Commands run in one bash, in order, from the repository root, so
`export`s carry over. Output is compared line by line, ignoring blank lines and runs of
spaces (a table's padding follows its title's length); in the expected text `…` stands for
anything on its line, a line of only `…` for any number of lines, and an id, a date and time,
a decimal (the model's figures may move in the last digit between machines) or `N ms` for any
value of its kind.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.processes import free_port, wait_healthy

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SECTION = "## Tutorial"
VENV = Path(sys.executable).parent.parent
DOCUMENTED_URL = "http://127.0.0.1:8000"


@dataclass(slots=True)
class Step:
    command: str
    expected: list[str] = field(default_factory=list)


def tutorial_steps(markdown: str) -> list[Step]:
    start = markdown.index(SECTION)
    end = markdown.find("\n## ", start + len(SECTION))
    section = markdown[start : end if end != -1 else None]
    steps: list[Step] = []
    for block in re.findall(r"```console\n(.*?)```", section, flags=re.DOTALL):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                steps[-1].expected.append(lines[i])
                i += 1
                continue
            command = lines[i][2:]
            while _open(command):
                i += 1
                command += "\n" + lines[i]
            steps.append(Step(command))
            i += 1
    return steps


def _open(command: str) -> bool:
    if command.endswith("\\"):
        return True
    try:
        shlex.split(command)
    except ValueError:  # an unclosed quote
        return True
    return False


def _normal(line: str) -> str:
    return " ".join(line.split())


# What may differ from run to run, each standing for any value of its kind.
VOLATILE = {
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}": "[0-9a-f-]{36}",
    r"\d{4}-\d\d-\d\d \d\d:\d\d": r"\d{4}-\d\d-\d\d \d\d:\d\d",
    r"\d+\.\d+": r"-?\d+\.\d+",
    r"\d+ ms\b": r"\d+ ms",
    "…": ".*?",
}
TOKENS = re.compile("|".join(f"({k})" for k in VOLATILE))


def _line_pattern(line: str) -> str:
    patterns = list(VOLATILE.values())
    out, last = [], 0
    normal = _normal(line)
    for match in TOKENS.finditer(normal):
        kind = (match.lastindex or 1) - 1  # which alternative matched
        out += [re.escape(normal[last : match.start()]), patterns[kind]]
        last = match.end()
    return "".join([*out, re.escape(normal[last:])])


def matches(expected: list[str], actual: str) -> bool:
    parts = []
    for line in expected:
        if not line.strip():
            continue
        parts.append(r"(?:[^\n]*\n)*?" if line.strip() == "…" else _line_pattern(line) + r"\n")
    text = "".join(_normal(a) + "\n" for a in actual.splitlines() if a.strip())
    return re.fullmatch("".join(parts), text) is not None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A fresh `rag serve` on its embedded defaults (database, local model), as in the README."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env = {**clean, "RAG_DATA_DIR": str(tmp_path_factory.mktemp("tutorial")), "COLUMNS": "120"}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_healthy(f"{url}/readyz"), "the service did not come up"
        yield url, env
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def test_the_steps_are_found() -> None:
    steps = tutorial_steps(README.read_text())
    commands = [s.command for s in steps]
    assert len(steps) >= 15
    assert any(c.startswith("rag ingest") for c in commands)
    assert any("--mode keyword" in c for c in commands)
    assert any("/mcp" in c for c in commands)
    assert all(s.expected for s in steps if not s.command.startswith(("source", "export"))), [
        s.command for s in steps if not s.expected
    ]


def test_matching_is_not_lenient() -> None:
    assert matches(["a 0.80 │ 4 ms", "…", "end"], "a   0.79 │ 12 ms\nx\ny\nend\n")
    uuid, other = "7c78de72-1864-4ad7-85c3-2ee77183fc9f", "0bfce9f0-d55e-4e76-a0a6-0f240c65fc55"
    assert matches([f"│ {uuid} │ 2026-11-25 23:30 │"], f"│ {other} │ 2027-01-02 08:00 │\n")
    assert not matches([f"│ {uuid} │ x"], f"│ {other} │ y\n")
    assert not matches(["a 0.80 │ 4 ms"], "b 0.80 │ 4 ms\n")
    assert not matches(["one", "two"], "one\n")
    assert not matches(["one"], "one\ntwo\n")


def test_the_tutorial_runs_as_written(server: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    url, env = server
    steps = tutorial_steps(README.read_text())
    script = ["set +e", f"cd {shlex.quote(str(ROOT))}"]
    for n, step in enumerate(steps):
        command = step.command.replace(DOCUMENTED_URL, url).replace(
            "source .venv/bin/activate", f"source {shlex.quote(str(VENV))}/bin/activate"
        )
        script.append(f"{{\n{command}\n}} > {tmp_path}/{n}.out 2>&1")
    run = subprocess.run(
        ["bash", "-c", "\n".join(script)], env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stderr
    differ = []
    for n, step in enumerate(steps):
        actual = (tmp_path / f"{n}.out").read_text()
        if not matches(step.expected, actual):
            expected = "\n".join(step.expected)
            differ.append(f"$ {step.command}\n--- expected\n{expected}\n--- got\n{actual}")
    assert not differ, "\n\n".join(differ)
