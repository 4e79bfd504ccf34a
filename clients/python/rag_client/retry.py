"""Optional retries: on 429 and 503, after the wait the service asks for (`Retry-After`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rag_client.errors import ProblemError, retry_after_seconds


@dataclass(frozen=True, slots=True)
class Retry:
    """Try up to `attempts` times in all. Waits `Retry-After` when the reply gives one, else
    `backoff` x 2^(n-1) seconds; gives up at once when the wait asked for exceeds `max_wait`.
    `on_wait(error, seconds)` is called before each wait (to tell a person why it pauses)."""

    attempts: int = 3
    statuses: frozenset[int] = frozenset({429, 503})
    backoff: float = 0.5
    max_wait: float = 60.0
    on_wait: Callable[[ProblemError, float], object] | None = None

    def wait(self, attempt: int, error: ProblemError) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to raise `error` now."""
        if attempt >= self.attempts or error.status not in self.statuses:
            return None
        asked = retry_after_seconds(error.headers.get("retry-after"))
        wait = asked if asked is not None else self.backoff * 2 ** (attempt - 1)
        if wait > self.max_wait:
            return None
        if self.on_wait is not None:
            self.on_wait(error, wait)
        return wait


NO_RETRY = Retry(attempts=1)
