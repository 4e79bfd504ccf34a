"""ASGI middleware: rate-limit headers on every reply, a cap on request bodies, one Host."""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import TOO_LARGE_SLUG, TOO_LARGE_TITLE, BodyTooLarge, problem_body

RATE_LIMIT_HEADERS_STATE = "rate_limit_headers"
BODY_OVERHEAD = 64 * 1024  # multipart boundaries and form fields around an upload


class RateLimitHeaders:
    """Copies the gate's rate-limit headers onto whatever reply the request gets."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                found = scope.get("state", {}).get(RATE_LIMIT_HEADERS_STATE)
                if found:
                    headers = MutableHeaders(scope=message)
                    for name, value in found.items():
                        if name not in headers:
                            headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodyLimit:
    """413 for a body over `max_bytes`: by Content-Length up front, else while it streams (the
    reader gets BodyTooLarge, which the app's handlers answer; this one answers it when it
    escapes them before a reply began)."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, per_path: dict[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes + BODY_OVERHEAD
        self.per_path = {path: limit + BODY_OVERHEAD for path, limit in (per_path or {}).items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(scope["path"].rstrip("/"), self.max_bytes)
        length = Headers(scope=scope).get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _too_large(send, limit)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge(limit)
            return message

        started = False

        async def noting_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, noting_send)
        except BodyTooLarge:
            if started:
                raise
            await _too_large(send, limit)


async def _too_large(send: Send, limit: int) -> None:
    body = problem_body(
        status=413,
        title=TOO_LARGE_TITLE,
        detail=str(BodyTooLarge(limit).detail),
        slug=TOO_LARGE_SLUG,
    )
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/problem+json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


class SingleHost:
    """RFC 9112 section 3.2: a request with more than one Host line, or an HTTP/1.1 request
    with none, is a 400 and its connection is closed. Which host such a request meant cannot
    be told: the MCP transport's DNS-rebinding check read one Host, a proxy may route on
    another."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            hosts = sum(1 for name, _ in scope["headers"] if name == b"host")
            if hosts > 1 or (hosts == 0 and scope.get("http_version") == "1.1"):
                detail = f"a request carries exactly one Host header (RFC 9112), not {hosts}"
                body = problem_body(
                    status=400, title="Bad request", detail=detail, slug="host-header"
                )
                headers = [
                    (b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ]
                await send({"type": "http.response.start", "status": 400, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
