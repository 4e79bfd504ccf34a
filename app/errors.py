"""The application's error family; `install_error_handlers` renders them as RFC 9457 problems."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar


class AppError(Exception):
    """An error with an HTTP meaning; domain code raises these, never HTTPException."""

    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"
    type_slug: ClassVar[str] = "internal"

    def __init__(
        self,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


class BadRequest(AppError):
    status, title, type_slug = 400, "Bad request", "bad-request"


class Unauthenticated(AppError):
    status, title, type_slug = 401, "Unauthenticated", "unauthenticated"


class Forbidden(AppError):
    status, title, type_slug = 403, "Forbidden", "forbidden"


class NotFound(AppError):
    status, title, type_slug = 404, "Not found", "not-found"


class Conflict(AppError):
    status, title, type_slug = 409, "Conflict", "conflict"


class PayloadTooLarge(AppError):
    status, title, type_slug = 413, "Payload too large", "payload-too-large"


class UnsupportedMediaType(AppError):
    status, title, type_slug = 415, "Unsupported media type", "unsupported-media-type"


class Unprocessable(AppError):
    status, title, type_slug = 422, "Unprocessable content", "unprocessable"


class RateLimited(AppError):
    status, title, type_slug = 429, "Too many requests", "rate-limited"


class ServiceUnavailable(AppError):
    status, title, type_slug = 503, "Service unavailable", "unavailable"
