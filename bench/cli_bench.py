"""Start-up time of the `rag` command: median wall time of whole processes.

    python -m bench.cli_bench [-n RUNS] [--rag PATH]

Runs each command once to warm the file cache, then RUNS times, and prints the median, min
and max wall seconds; also which heavy modules each command imported (`-X importtime`).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = [["--help"], ["--version"], ["token", "--tenant", "acme"], ["tenant", "--help"]]
HEAVY = ("torch", "sqlalchemy", "asyncpg", "app.db", "sentence_transformers", "httpx")


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=False)
    return time.perf_counter() - started


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
    args = parser.parse_args()
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
