"""Render every error as an RFC 9457 problem (application/problem+json)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import asyncpg
from asgi_correlation_id import correlation_id
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from app.db.failures import is_unreachable
from app.errors import AppError

_log = logging.getLogger(__name__)
PROBLEM_TYPE_BASE = "https://rag-service.dev/problems/"
PROBLEM_JSON = "application/problem+json"
DATABASE_RETRY_AFTER = 5
QUERY_CANCELED = "57014"


TOO_LARGE_TITLE, TOO_LARGE_SLUG = "Payload too large", "payload-too-large"


class BodyTooLarge(StarletteHTTPException):
    """A request body found over its limit while it streams in (`BodyLimit`, a chunked body
    has no length to refuse up front). An HTTPException because FastAPI re-raises those from
    its body parsing, and turns any other error there into a 400."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


def problem_body(*, status: int, title: str, detail: str, slug: str) -> bytes:
    body = {"type": PROBLEM_TYPE_BASE + slug, "title": title, "status": status, "detail": detail}
    return json.dumps(body).encode()


def problem_response(
    *,
    status: int,
    title: str,
    detail: str,
    slug: str,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> JSONResponse:
    body: dict[str, object] = {
        "type": PROBLEM_TYPE_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
        **(extra or {}),
    }
    return JSONResponse(
        body, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_JSON
    )


async def _app_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    return problem_response(
        status=exc.status,
        title=exc.title,
        detail=exc.detail,
        slug=exc.type_slug,
        headers=exc.headers,
        extra=exc.extra,
    )


def _field_errors(exc: RequestValidationError) -> list[dict[str, object]]:
    errors: list[dict[str, object]] = []
    for error in exc.errors():
        location = [str(part) for part in error.get("loc", ())]
        field = ".".join(location[1:]) if len(location) > 1 else ".".join(location)
        errors.append({"field": field, "location": location, "message": error.get("msg", "")})
    return errors


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _field_errors(exc)
    names = ", ".join(sorted({str(e["field"]) for e in errors})) or "the request"
    return problem_response(
        status=422,
        title="Invalid request",
        detail=f"invalid value for: {names}",
        slug="validation",
        extra={"errors": errors},
    )


async def _body_too_large(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BodyTooLarge)
    return problem_response(
        status=413, title=TOO_LARGE_TITLE, detail=str(exc.detail), slug=TOO_LARGE_SLUG
    )


async def _client_gone(_request: Request, exc: Exception) -> JSONResponse:
    """The connection ended while the route read the body (the client left, or its body did
    not arrive in time and the server answered 408 itself), or while a synchronous ingest was
    under way (app/api/disconnects.py, which logs what it stopped): nobody reads this reply."""
    _log.info("the client's connection ended before its reply")
    return problem_response(
        status=400, title="Bad request", detail="the connection ended", slug="client-gone"
    )


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return problem_response(
        status=exc.status_code,
        title=str(exc.detail) if exc.status_code < 500 else "Error",
        detail=str(exc.detail),
        slug=f"http-{exc.status_code}",
        headers=exc.headers,
    )


def _is_cancelled(exc: Exception) -> bool:
    """A statement PostgreSQL cancelled: past `statement_timeout` (SQLSTATE 57014). Raised
    by the driver itself on the direct search path (app/db/scoped.py), else wrapped by
    SQLAlchemy."""
    if isinstance(exc, asyncpg.QueryCanceledError):
        return True
    if not isinstance(exc, sa_exc.DBAPIError):
        return False
    cause = getattr(exc.orig, "__cause__", None)
    return isinstance(cause, asyncpg.QueryCanceledError) or (
        getattr(exc.orig, "sqlstate", None) == QUERY_CANCELED
    )


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """Database errors: 503 when it cannot be reached or a statement ran past its time limit,
    else a bare 500. Registered for these types so the reply passes the middleware
    (rate-limit headers) like any other."""
    if _is_cancelled(exc):
        _log.warning("database statement cancelled (statement timeout)")
        return problem_response(
            status=503,
            title="Query timed out",
            detail="a database statement ran past the time limit; retry later or narrow the"
            " request",
            slug="statement-timeout",
            headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
        )
    if is_unreachable(exc):
        _log.warning("database unavailable: %s", type(exc).__name__)
        return problem_response(
            status=503,
            title="Service unavailable",
            detail="the database is not reachable; retry shortly",
            slug="database-unavailable",
            headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
        )
    return await _unexpected(request, exc)


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    _log.exception("unhandled error", exc_info=exc)
    return problem_response(
        status=500, title="Internal error", detail="an unexpected error occurred", slug="internal"
    )


async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    """Any other exception. Starlette answers it from its outermost middleware, past the one
    that echoes X-Request-ID, so the header is set here."""
    reply = await _unexpected(request, exc)
    if request_id := correlation_id.get():
        reply.headers["X-Request-ID"] = request_id
    return reply


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(AppError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(BodyTooLarge, _body_too_large)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for database_error in (
        OSError,
        sa_exc.DBAPIError,
        sa_exc.TimeoutError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
    ):
        app.add_exception_handler(database_error, _database_error)
    app.add_exception_handler(Exception, _unhandled)
