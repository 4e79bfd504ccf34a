"""Start-up time of the `rag` command: median wall time of whole processes.

    python -m bench.cli_bench [-n RUNS] [--rag PATH] [--in-process]

Runs each command once to warm the file cache, then RUNS times, and prints the median, min
and max wall seconds; also which heavy modules each command imported (`-X importtime`).

--in-process: the data commands on the embedded database instead (a tenant with one document
in a new data directory), as CPU seconds (user + system, with the children the command waits
for; the database server's own are not counted): what each command costs beyond its work.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = [["--help"], ["--version"], ["token", "--tenant", "acme"], ["tenant", "--help"]]
IN_PROCESS = [
    ["tenant", "create", "acme"],
    ["documents", "list", "--tenant", "acme"],
    ["search", "volcanoes", "--tenant", "acme"],
]
HEAVY = ("torch", "sqlalchemy", "asyncpg", "app.db", "sentence_transformers", "httpx")


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=False)
    return time.perf_counter() - started


def cpu(argv: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of `argv`, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def in_process(rag: str, runs: int) -> None:
    """The data commands on the embedded database (the server runs as its own system user
    when started as root: the data directory's parents must be readable by it)."""
    scratch = Path(tempfile.mkdtemp(prefix="rag-cli-bench-"))
    scratch.chmod(0o755)
    env = {**os.environ, "RAG_DATA_DIR": str(scratch / "data")}
    document = scratch / "volcanoes.md"
    document.write_text("# Volcanoes\n\nMagma erupts as lava from a volcano.\n")
    setup = [["tenant", "create", "acme"], ["ingest", str(document), "--tenant", "acme"]]
    try:
        for command in setup:
            subprocess.run([rag, *command], env=env, capture_output=True, check=True)
        for command in IN_PROCESS:
            argv = [rag, *command]
            times = [cpu(argv, env) for _ in range(runs)]
            sys.stdout.write(
                f"rag {' '.join(command):32} median {statistics.median(times):.2f} s CPU "
                f"(min {min(times):.2f}, max {max(times):.2f}, n={runs})\n"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    python = Path(argv[0]).with_name("python")
    run = subprocess.run(
        [str(python), "-X", "importtime", "-m", "app.cli.main", *argv[1:]],
        env=env,
        cwd=tempfile.gettempdir(),  # not the checkout: PYTHONPATH decides which tree runs
        capture_output=True,
        text=True,
        check=False,
    )
    found = set(re.findall(r"\|\s+([\w.]+)\s*$", run.stderr, flags=re.MULTILINE))
    return sorted(h for h in HEAVY if h in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--runs", type=int, default=10)
    parser.add_argument("--rag", default=str(Path(sys.executable).with_name("rag")))
    parser.add_argument("--in-process", action="store_true", help="the data commands' CPU")
    args = parser.parse_args()
    if args.in_process:
        in_process(args.rag, args.runs)
        return
    env = {**os.environ, "RAG_DATA_DIR": tempfile.mkdtemp(prefix="rag-cli-bench-")}
    for command in COMMANDS:
        argv = [args.rag, *command]
        wall(argv, env)
        times = [wall(argv, env) for _ in range(args.runs)]
        sys.stdout.write(
            f"rag {' '.join(command):24} median {statistics.median(times):.3f} s "
            f"(min {min(times):.3f}, max {max(times):.3f}, n={args.runs}) "
            f"heavy imports: {', '.join(heavy_imports(argv, env)) or 'none'}\n"
        )


if __name__ == "__main__":
    main()
