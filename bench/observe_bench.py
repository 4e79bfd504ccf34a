"""What the request id, access log and HTTP metrics cost per request (app/api/observe.py).

    python -m bench.observe_bench [-n 20000] [--rounds 7]

A bare Starlette app answering GET /healthz is called directly through ASGI (no socket, no
HTTP parsing: only the middleware differs) N times per round, in four forms: bare; with the
metrics only (access log level WARNING); with the request id, metrics and the JSON access
line (as `rag serve` runs, written to /dev/null); the same with a text line. Reported: the
median over rounds of the microseconds per request, and each form's cost over the bare app.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message

from app.api.observe import Observe, RequestId
from app.observability.logs import (
    BackgroundHandler,
    RequestIdFilter,
    ServiceJsonFormatter,
    ServiceTextFormatter,
)


async def healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def bare() -> ASGIApp:
    return Starlette(routes=[Route("/healthz", healthz)])


def scope() -> dict[str, object]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/healthz",
        "raw_path": b"/healthz",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"bench"), (b"x-request-id", b"bench-1")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(_message: Message) -> None:
    return None


async def per_request_us(app: ASGIApp, n: int) -> tuple[float, float]:
    """Wall-clock and CPU (every thread of the process) microseconds per request."""
    for _ in range(200):  # warm-up
        await app(scope(), _receive, _send)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await app(scope(), _receive, _send)
    return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6


def access_log(formatter: logging.Formatter | None, *, background: bool = True) -> None:
    """The access logger as `rag serve` sets it up, writing to /dev/null (None: off)."""
    log = logging.getLogger("app.access")
    for old in log.handlers:
        old.close()
    log.handlers.clear()
    log.propagate = False
    if formatter is None:
        log.setLevel(logging.WARNING)
        return
    sink = open("/dev/null", "w")  # noqa: SIM115
    handler: logging.Handler
    if background:
        handler = BackgroundHandler(formatter, sink)
    else:
        handler = logging.StreamHandler(sink)
        handler.setFormatter(formatter)
        handler.addFilter(RequestIdFilter())
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def observed() -> ASGIApp:
    return RequestId(Observe(bare()))


Form = tuple[Callable[[], ASGIApp], Callable[[], None]]
FORMS: dict[str, Form] = {
    "bare app": (bare, lambda: access_log(None)),
    "+ metrics": (lambda: Observe(bare()), lambda: access_log(None)),
    "+ request id, metrics, JSON line": (observed, lambda: access_log(ServiceJsonFormatter())),
    "  (JSON line written by the request)": (
        observed,
        lambda: access_log(ServiceJsonFormatter(), background=False),
    ),
    "+ request id, metrics, text line": (observed, lambda: access_log(ServiceTextFormatter())),
}


async def run(n: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Per form: wall-clock µs per request on the request's path, and CPU µs per request with
    every line written (the logging thread's share included)."""
    walls: dict[str, list[float]] = {name: [] for name in FORMS}
    cpus: dict[str, list[float]] = {name: [] for name in FORMS}
    for _ in range(rounds):  # interleaved, so a noisy moment hits every form alike
        for name, (build, set_up) in FORMS.items():
            set_up()
            wall, cpu = await per_request_us(build(), n)
            started = time.process_time()
            access_log(None)  # waits for the logging thread to write what is queued
            walls[name].append(wall)
            cpus[name].append(cpu + (time.process_time() - started) / n * 1e6)
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in FORMS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    medians = asyncio.run(run(args.n, args.rounds))
    wall0, cpu0 = medians["bare app"]
    sys.stdout.write(f"{'':<38} {'wall':>10} {'CPU':>10}\n")
    for name, (wall, cpu) in medians.items():
        extra = "" if name == "bare app" else f"  (+{wall - wall0:.1f} / +{cpu - cpu0:.1f} µs)"
        sys.stdout.write(f"{name:<38} {wall:7.1f} µs {cpu:7.1f} µs{extra}\n")


if __name__ == "__main__":
    main()
