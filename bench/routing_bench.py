"""How long the service's app takes to find a request's route, by path.

    python -m bench.routing_bench [-n 20000] [--rounds 7]

FastAPI matches a path against the app's routers in the order they were included (app/main.py),
each of them against its own routes. This matches each path below against `create_app()`'s
routes as Starlette's router does (the first full match wins), N times per round, and reports
the median over rounds of the microseconds per match. No database is needed: the app is built,
not started.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from starlette.routing import Match

from app.main import create_app
from app.settings import Settings
from bench.kit.report import print_table

PATHS = (
    ("POST", "/api/rag/search"),
    ("POST", "/api/rag/context"),
    ("GET", "/healthz"),
    ("GET", "/api/rag/documents"),
    ("POST", "/api/rag/dedupe"),
    ("GET", "/api/admin/tenants"),
)


def match_us(routes: list[Any], method: str, path: str, n: int) -> float:
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
    started = time.process_time()
    for _ in range(n):
        for route in routes:
            if route.matches(scope)[0] is Match.FULL:
                break
        else:
            raise SystemExit(f"no route for {method} {path}")
    return (time.process_time() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    settings = Settings(database_url="postgresql+asyncpg://bench@127.0.0.1:1/bench")
    routes = create_app(settings).router.routes
    times: dict[str, list[float]] = {f"{m} {p}": [] for m, p in PATHS}
    for _ in range(args.rounds):
        for method, path in PATHS:
            times[f"{method} {path}"].append(match_us(routes, method, path, args.n))
    print_table(
        f"Finding the route, CPU µs a request (medians of {args.rounds} rounds of {args.n})",
        ["request", "µs"],
        [(request, f"{statistics.median(values):.1f}") for request, values in times.items()],
    )


if __name__ == "__main__":
    main()
