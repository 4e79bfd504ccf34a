"""One closed-loop run of wrk: `clients` connections for `seconds`, each request the next
body of a file, with the CPU of the processes behind it."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.saturation.cpu import Meter

SCRIPT = Path(__file__).with_name("load.lua")
TIMEOUT_SECONDS = 30  # a request slower than this counts as an error


@dataclass(frozen=True, slots=True)
class Target:
    base_url: str
    path: str
    token: str = ""
    method: str = "POST"  # GET: the bodies are not sent


@dataclass(frozen=True, slots=True)
class RunResult:
    clients: int
    seconds: float
    requests: int
    errors: int  # connect, read, write, timeouts and replies other than 2xx/3xx
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    cpu_s: dict[str, float]  # CPU seconds of each part during the run
    bodies: int  # distinct bodies available: requests beyond them repeated earlier ones

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def cpu_ms_per_request(self) -> dict[str, float]:
        if not self.requests:
            return {name: float("nan") for name in self.cpu_s}
        return {name: 1000 * s / self.requests for name, s in self.cpu_s.items()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "seconds": round(self.seconds, 2),
            "requests": self.requests,
            "per_second": round(self.per_second, 1),
            "errors": self.errors,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
            "cpu_ms_per_request": {k: round(v, 3) for k, v in self.cpu_ms_per_request().items()},
            "repeated_bodies": max(0, self.requests - self.bodies),
        }


def wrk_binary() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk")
    return found


def run(
    target: Target, bodies: list[str], *, clients: int, seconds: float, meter: Meter
) -> RunResult:
    """wrk with one thread (its own CPU is ~0.05 ms a request: one core is never its limit)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as file:
        file.write("\n".join(bodies) + "\n")
    command = [
        wrk_binary(),
        "--threads",
        "1",
        "--connections",
        str(clients),
        "--duration",
        f"{seconds:g}s",
        "--timeout",
        f"{TIMEOUT_SECONDS}s",
        "--script",
        str(SCRIPT),
        target.base_url,
        "--",
        target.path,
        target.token,
        file.name,
        target.method,
    ]
    try:
        meter.start()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        cpu = meter.stop()
    finally:
        Path(file.name).unlink()
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    errors = sum(summary[k] for k in ("connect", "read", "write", "status", "timeout"))
    return RunResult(
        clients=clients,
        seconds=summary["duration_us"] / 1e6,
        requests=summary["requests"],
        errors=errors,
        p50_ms=summary["p50_us"] / 1000,
        p95_ms=summary["p95_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        max_ms=summary["max_us"] / 1000,
        cpu_s=cpu,
        bodies=len(bodies),
    )
