"""What the sync and async clients share: configuration and how one reply is judged."""

from __future__ import annotations

from typing import Literal, TypeVar

import httpx

from rag_client import __version__
from rag_client.calls import Call
from rag_client.errors import ProblemError, Timeout, TransportError, problem_of
from rag_client.retry import NO_RETRY, Retry

T = TypeVar("T")
DEFAULT_TIMEOUT = 30.0


ReadConsistency = Literal["replica", "primary"]


def headers(
    token: str | None, tenant: str | None, read_consistency: ReadConsistency | None = None
) -> dict[str, str]:
    found = {"User-Agent": f"rag-service-client/{__version__}", "Accept": "application/json"}
    if token:
        found["Authorization"] = f"Bearer {token}"
    if tenant:
        found["X-Tenant-ID"] = tenant
    if read_consistency:
        found["X-Read-Consistency"] = read_consistency
    return found


def retry_policy(retries: Retry | int | None) -> Retry:
    if retries is None:
        return NO_RETRY
    if isinstance(retries, int):
        return Retry(attempts=max(1, retries + 1))
    return retries


def outcome(call: Call[T], response: httpx.Response) -> T | ProblemError:
    """The parsed reply, or the typed error it carries."""
    if response.is_success:
        return call.parse(response)
    return problem_of(response)


def transport_error(error: httpx.TransportError) -> TransportError:
    if isinstance(error, httpx.TimeoutException):
        return Timeout(f"no answer in time: {error}")
    return TransportError(f"cannot reach the service: {error}")
