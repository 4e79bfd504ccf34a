"""The rate limit from outside: a tenant of the limited tier gets exactly its budget in a
window, then 429 with Retry-After; behind the compose stack's proxy the requests are spread
over both app replicas, which share the budget through Redis."""

from __future__ import annotations

import pytest

from tests.blackbox.target import Target

pytestmark = pytest.mark.slow


def test_the_budget_is_shared_and_429_says_when_to_retry(target: Target) -> None:
    tenant = target.new_tenant("limited", tier=target.limited_tier)
    tenant.http.close()
    admitted, refused, upstreams = 0, [], set()
    # a new connection per request, so the proxy (or the kernel, for `rag serve --workers`)
    # spreads them over the processes that answer
    with target.client(tenant.token, keep_alive=False) as http:
        first = http.get("/api/rag/documents")
        assert first.status_code == 200, first.text
        limit = int(first.headers["RateLimit-Limit"])
        assert int(first.headers["RateLimit-Remaining"]) == limit - 1
        admitted += 1
        upstreams.add(first.headers.get("X-Served-By"))
        for _ in range(limit + 4):  # limit + 5 requests in all
            reply = http.get("/api/rag/documents")
            if reply.status_code == 200:
                admitted += 1
                upstreams.add(reply.headers.get("X-Served-By"))
            else:
                refused.append(reply)
    assert admitted == limit  # never more: one budget, however many replicas
    assert len(refused) == 5
    for reply in refused:
        assert reply.status_code == 429
        assert int(reply.headers["Retry-After"]) >= 1
        assert reply.headers["content-type"].startswith("application/problem+json")
        assert reply.json()["status"] == 429
    if None not in upstreams:  # behind the compose proxy: which replica answered
        assert len(upstreams) >= 2, upstreams
