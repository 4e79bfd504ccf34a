"""The service's RFC 9457 problem replies as typed exceptions."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import httpx


class RagError(Exception):
    """Anything the client raises."""


class TransportError(RagError):
    """The service could not be reached, or did not answer in time (`__cause__` says how)."""


class Timeout(TransportError):
    """No answer within the client's timeout."""


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid field of a 422 reply: `field` is dotted (`filters.metadata`)."""

    field: str
    message: str
    location: tuple[str, ...] = ()


class ProblemError(RagError):
    """An error reply: `status`, `title`, `detail`, `type` and the whole `problem` body."""

    status_code: ClassVar[int | None] = None

    def __init__(
        self,
        *,
        status: int,
        title: str,
        detail: str,
        type: str = "about:blank",
        problem: Mapping[str, object] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.problem: dict[str, object] = dict(problem or {})
        self.headers: dict[str, str] = dict(headers or {})


class BadRequest(ProblemError):
    status_code = 400


class Unauthorized(ProblemError):
    """401: no token, or one the service does not accept (expired, another key, ...)."""

    status_code = 401


class Forbidden(ProblemError):
    """403: the token lacks the scope, the tenant is suspended, or X-Tenant-ID differs."""

    status_code = 403


class NotFound(ProblemError):
    status_code = 404


class Conflict(ProblemError):
    status_code = 409


class PayloadTooLarge(ProblemError):
    status_code = 413


class UnsupportedMediaType(ProblemError):
    status_code = 415


class Invalid(ProblemError):
    """422: `errors` lists the fields at fault."""

    status_code = 422

    @property
    def errors(self) -> list[FieldError]:
        found = self.problem.get("errors")
        if not isinstance(found, list):
            return []
        return [
            FieldError(
                field=str(item.get("field", "")),
                message=str(item.get("message", "")),
                location=tuple(str(part) for part in item.get("location", ())),
            )
            for item in found
            if isinstance(item, dict)
        ]


class _RetryAfter(ProblemError):
    @property
    def retry_after(self) -> float | None:
        """Seconds to wait before trying again (the `Retry-After` header), if given."""
        return retry_after_seconds(self.headers.get("retry-after"))


class RateLimited(_RetryAfter):
    """429: the tenant's request budget is spent; `retry_after` says when it refills."""

    status_code = 429


class ServiceUnavailable(_RetryAfter):
    """503: the database or the embedder cannot be reached right now."""

    status_code = 503


class ServerError(ProblemError):
    """Any other 5xx."""


_BY_STATUS: dict[int, type[ProblemError]] = {
    cls.status_code: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        PayloadTooLarge,
        UnsupportedMediaType,
        Invalid,
        RateLimited,
        ServiceUnavailable,
    )
    if cls.status_code is not None
}


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def problem_of(response: httpx.Response) -> ProblemError:
    """The typed exception for an error reply (a problem+json body, or whatever came)."""
    body: dict[str, object] = {}
    try:
        parsed = response.json()
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    status = response.status_code
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ProblemError)
    return cls(
        status=status,
        title=str(body.get("title") or response.reason_phrase or "Error"),
        detail=str(body.get("detail") or response.text[:500]),
        type=str(body.get("type") or "about:blank"),
        problem=body,
        headers={name.lower(): value for name, value in response.headers.items()},
    )
