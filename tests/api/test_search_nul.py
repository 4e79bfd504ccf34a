"""NUL characters (which PostgreSQL text cannot hold) in a search body are a 422, not a 500
(found by the schema-driven fuzzer)."""

from __future__ import annotations

import pytest

from tests.api.calls import assert_problem
from tests.conftest import TenantClient


@pytest.mark.parametrize(
    "body",
    [
        {"query": "backups", "collections": ["hand\u0000book"]},
        {"query": "back\u0000ups", "mode": "hybrid"},
        {"query": "backups", "filters": {"metadata": {"te\u0000am": "sre"}}},
        {"query": "backups", "filters": {"metadata": {"team": "s\u0000re"}}},
    ],
)
@pytest.mark.parametrize("path", ["/api/rag/search", "/api/rag/context"])
async def test_nul_characters_in_a_search_are_a_422(
    tenant_a: TenantClient, path: str, body: dict[str, object]
) -> None:
    reply = await tenant_a.http.post(path, json=body, headers=tenant_a.headers)
    assert_problem(reply, 422)
