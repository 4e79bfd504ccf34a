"""Cost of counting one request for the admin traffic statistics (UsageRecorder.record).

.venv/bin/python -m bench.usage_bench
"""

from __future__ import annotations

import statistics
import time

from app.usage import UsageRecorder

CALLS = 100_000
RUNS = 7


def main() -> None:
    recorder = UsageRecorder()
    per_call = []
    for _ in range(RUNS):
        started = time.perf_counter()
        for i in range(CALLS):
            recorder.record(f"tenant-{i % 100}", "searches")
        per_call.append((time.perf_counter() - started) / CALLS * 1e6)
    print(f"record(): median {statistics.median(per_call):.2f} us per call over {RUNS} runs")  # noqa: T201


if __name__ == "__main__":
    main()
