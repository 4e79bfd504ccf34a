"""The latency a request spent inside the service, read from its access lines (`app.access`,
JSON: `duration_ms` from the first middleware's start to the reply sent), beside the latency
wrk measured from outside. What wrk sees and the service does not is time the request waited
before a worker's event loop took it up: in the socket, behind other requests' work on the
same loop, or for a core."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


class AccessLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def mark(self) -> int:
        """Where the log ends now: `durations` reads the lines written after it."""
        return self.path.stat().st_size

    def durations(self, since: int, route: str) -> list[float]:
        """`duration_ms` of the access lines of `route` written after `since`."""
        with self.path.open("rb") as file:
            file.seek(since)
            lines = file.read().splitlines()
        found = []
        for line in lines:
            if not line.startswith(b"{") or b'"app.access"' not in line:
                continue
            record = json.loads(line)
            if record.get("route") == route:
                found.append(float(record["duration_ms"]))
        return found


def percentiles(durations: list[float]) -> dict[str, float]:
    """P50 and P99 in ms ({} without durations)."""
    if len(durations) < 2:
        return {}
    cuts = statistics.quantiles(durations, n=100, method="inclusive")
    return {"inside_p50_ms": round(cuts[49], 1), "inside_p99_ms": round(cuts[98], 1)}
