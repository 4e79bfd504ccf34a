"""Where a worker's CPU goes under load: py-spy samples one worker process while wrk drives
the service, and each sample is given to the first part of the hot path found in its stack,
innermost frame first."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from bench.saturation.cpu import Meter, ReapedChildren, worker_pids
from bench.saturation.wrk import Target, run

# (part, substrings of a frame's "function (file)"), innermost frame matched first
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "query embedding (ONNX, tokenizer)",
        ("onnxruntime", "tokenizers", "onnx_model.py", "sentence_transformers"),
    ),
    ("JWT", ("jose/", "jwt", "app/auth/")),
    ("rate limit (Redis client)", ("redis/", "app/ratelimit/")),
    ("database driver (asyncpg)", ("asyncpg/",)),
    ("SQLAlchemy", ("sqlalchemy/",)),
    ("validation and JSON (pydantic)", ("pydantic", "json/", "orjson")),
    (
        "HTTP (uvicorn, h11, starlette, FastAPI)",
        ("uvicorn/", "h11/", "httptools", "starlette/", "fastapi/"),
    ),
    ("metrics and logs", ("prometheus_client", "logging/", "app/observability/")),
    ("event loop and threads", ("asyncio/", "anyio/", "threading.py", "concurrent/")),
    ("service code (app/)", ("app/",)),
)


def sample(
    pid: int,
    target: Target,
    bodies: list[str],
    *,
    clients: int,
    seconds: float,
    keep: Path | None = None,
) -> dict[str, float]:
    """Share of one worker's sampled CPU per part, while wrk runs for `seconds`."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    worker = (worker_pids(pid) or [pid])[0]  # one worker: `rag serve` serves in its own process
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "stacks.txt"
        command = [
            py_spy,
            "record",
            "--pid",
            str(worker),
            "--duration",
            str(int(seconds)),
            "--rate",
            "250",
            "--format",
            "raw",
            "--output",
            str(out),
        ]
        spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load = threading.Thread(
            target=run,
            args=(target, bodies),
            kwargs={
                "clients": clients,
                "seconds": seconds + 2,
                "meter": Meter({"wrk": ReapedChildren()}),
            },
        )
        load.start()
        spy.wait()
        load.join()
        text = out.read_text()
    if keep is not None:  # the stacks themselves, for a flame graph or a closer look
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_text(text)
    return shares(text)


# leaf frames of threads that wait (py-spy counts some of them as running)
WAITING = (
    "Condition.wait (threading.py",
    "Connection._recv (multiprocessing",
    "QueueListener.dequeue (logging",
    "Runner.run (asyncio/runners.py",
    "Queue.get (queue.py",
    "select (selectors.py",
)


def shares(collapsed: str) -> dict[str, float]:
    """Collapsed stacks ("frame;frame;... count" per line) summed by part, waits left out."""
    counts: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or frames[-1].startswith(WAITING):
            continue
        counts[_part(frames)] += int(count)
    total = sum(counts.values()) or 1
    return {part: counts[part] / total for part, _ in (*PARTS, ("other", ())) if counts[part]}


def _part(frames: list[str]) -> str:
    for frame in reversed(frames):
        for part, needles in PARTS:
            if any(needle in frame for needle in needles):
                return part
    return "other"
