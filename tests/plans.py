"""The plan of the statement a direct vector search sends, for tests that check which index
answers it."""

from __future__ import annotations

from collections.abc import Mapping

from app.db.scoped import scoped_connection
from app.db.tenancy import SessionMaker, Setting
from app.retrieval import SearchRequest
from app.retrieval.nearest import direct_statement
from app.retrieval.planning import search_settings


async def vector_search_plan(
    sessions: SessionMaker,
    tenant_id: str,
    model: str,
    vector: list[float],
    request: SearchRequest,
    settings: Mapping[str, Setting] | None = None,
) -> str:
    """EXPLAIN (COSTS OFF) of the direct vector statement for `request`, under the search's own
    settings and `settings` beside them."""
    compiled, arguments = direct_statement(vector, tenant_id, model, request)
    scope = {**search_settings(request, tenant_id), **(settings or {})}
    async with scoped_connection(sessions, tenant_id, settings=scope, read_only=True) as driver:
        rows = await driver.fetch(f"EXPLAIN (COSTS OFF) {compiled.sql}", *arguments)
    return "\n".join(row[0] for row in rows)
