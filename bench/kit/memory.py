"""Resident memory of this process, sampled while something runs: flat or growing."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 2**20


@dataclass
class RssPeak:
    before_mb: float
    peak_mb: float = 0.0

    @property
    def growth_mb(self) -> float:
        return self.peak_mb - self.before_mb


@contextmanager
def sampled_rss(every_seconds: float = 0.02) -> Iterator[RssPeak]:
    """The highest RSS seen while the block runs (a thread samples /proc/self/statm)."""
    peak = RssPeak(before_mb=rss_mb(), peak_mb=rss_mb())
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every_seconds):
            peak.peak_mb = max(peak.peak_mb, rss_mb())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()
        peak.peak_mb = max(peak.peak_mb, rss_mb())
