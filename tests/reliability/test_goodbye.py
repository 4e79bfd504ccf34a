"""A pooled connection that read the server's FATAL but not yet its closed socket (the server
shutting down, as PostgreSQL stopped under traffic in CI once showed): asyncpg refuses any
message on it with InternalClientError, not a connection error. Nothing has run on it, so every
door opens its transaction again on a new connection and answers, instead of a 500."""

from __future__ import annotations

from pydantic import SecretStr

from app.db.scoped import settled
from app.settings import Settings
from tests.conftest import DatabaseUrls, fresh_database
from tests.reliability.goodbye_proxy import goodbye_proxy
from tests.reliability.test_faults import own_app, tenant_with_a_document

# (what it exercises, method, path, body): the direct search path (app/db/scoped.py) and the
# ORM session path (app/db/tenancy.py), each right after every pooled connection was told
# goodbye.
DOORS = (
    ("direct search", "POST", "/api/rag/search", {"query": "harbour ships"}),
    (
        "filtered search (ORM)",
        "POST",
        "/api/rag/search",
        {"query": "harbour ships", "collections": ["default"]},
    ),
    ("documents list (ORM)", "GET", "/api/rag/documents", None),
)


async def test_connections_told_goodbye_are_replaced_not_a_500(
    settings: Settings, database: DatabaseUrls
) -> None:
    app_url = await fresh_database(database, "rag_test_goodbye")
    async with goodbye_proxy(app_url) as proxy:
        own = settings.model_copy(
            update={"database_url": SecretStr(proxy.url(app_url)), "redis_url": None}
        )
        async with own_app(own) as (http, resources):
            headers = await tenant_with_a_document(http, resources, own, "goodbye")
            for door, method, path, body in DOORS:
                before = await http.request(method, path, json=body, headers=headers)
                assert before.status_code == 200, (door, before.text)
                await settled(resources.sessions)  # no read-only COMMIT still on its way
                assert proxy.say_goodbye() > 0
                after = await http.request(method, path, json=body, headers=headers)
                assert after.status_code == 200, (door, after.status_code, after.text)
                assert _answer(after.json()) == _answer(before.json()), door


def _answer(body: dict[str, object]) -> dict[str, object]:
    """The reply without its timings."""
    return {k: v for k, v in body.items() if k not in ("timings", "search_time_ms")}
