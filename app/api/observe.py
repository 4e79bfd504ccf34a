"""ASGI middleware: the request id, one access-log line and the HTTP metrics per request.

`RequestId` (asgi-correlation-id) takes X-Request-ID when it is well-formed (1-128 of
A-Z a-z 0-9 . _ : -), else makes one, puts it in a context variable every log line of the
request reads, and echoes it on the reply. `Observe`, inside it, times the request and, once
the reply is sent, writes the access line (`app.access`: method, route template, status,
latency, tenant when the gate admitted one) and counts it by route template, never by raw
path: a path names documents and a query string may carry anything.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from asgi_correlation_id import CorrelationIdMiddleware
from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability.logs import is_request_id, new_request_id
from app.observability.metrics import (
    HTTP_DURATION,
    HTTP_IN_PROGRESS,
    HTTP_REQUESTS,
    tenant_label,
)

TENANT_STATE = "tenant_id"  # set by the gate (api/deps.py) on the request's state
UNMATCHED = "unmatched"  # the route label of a request no route took (404, 413 up front)
_log = logging.getLogger("app.access")

RequestId = partial(
    CorrelationIdMiddleware,
    header_name="X-Request-ID",
    generator=new_request_id,
    validator=is_request_id,
)


class Observe:
    def __init__(self, app: ASGIApp, *, tenant_label: bool = False) -> None:
        self.app, self.tenant_label = app, tenant_label
        # the metrics' children by label values: prometheus_client checks and locks on
        # every labels() call; the label values are bounded (templates, statuses)
        self._children: dict[tuple[str, str, int, str], tuple[Counter, Histogram]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before the reply: the error middleware answers 500

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        HTTP_IN_PROGRESS.inc()
        try:
            await self.app(scope, receive, observed_send)
        finally:
            HTTP_IN_PROGRESS.dec()
            self._record(scope, status, time.perf_counter() - started)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        method = scope["method"]
        route = getattr(scope.get("route"), "path", None) or UNMATCHED
        tenant = scope.get("state", {}).get(TENANT_STATE)
        key = (method, route, status, tenant_label(self.tenant_label, tenant))
        if (children := self._children.get(key)) is None:
            children = (
                HTTP_REQUESTS.labels(*key[:2], str(status), key[3]),
                HTTP_DURATION.labels(method, route),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        if _log.isEnabledFor(logging.INFO):
            ms = round(seconds * 1000, 1)
            _log.info(
                "%s %s %d %.1f ms%s",
                method,
                route,
                status,
                ms,
                f" tenant={tenant}" if tenant else "",
                extra={"method": method, "route": route, "status": status, "duration_ms": ms}
                | ({"tenant": tenant} if tenant else {}),
            )
