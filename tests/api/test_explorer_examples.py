"""The OpenAPI explorer's first examples, run on the README tutorial's files with the local
model: "Try it out" as it opens finds something for a person who has just done the tutorial."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from httpx import AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant

HANDBOOK = Path(__file__).resolve().parents[2] / "examples" / "tutorial" / "handbook"


def first_example(document: dict[str, Any], path: str) -> dict[str, Any]:
    """The body Swagger UI's "Try it out" starts from for POST `path`."""
    content = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    examples: dict[str, dict[str, Any]] = content["examples"]
    value: dict[str, Any] = next(iter(examples.values()))["value"]
    return value


async def ingest_tutorial(tenant: TenantClient) -> None:
    """The handbook folder, as `rag ingest examples/tutorial/handbook --collection handbook`."""
    for file in sorted(HANDBOOK.iterdir()):
        reply = await tenant.http.post(
            "/api/rag/documents/upload",
            files={"file": (file.name, file.read_bytes())},
            data={"external_id": file.name, "collection": "handbook"},
            headers=tenant.headers,
        )
        assert reply.status_code == 201, reply.text


async def test_the_first_search_and_context_examples_find_the_tutorials_pages(
    real_client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(real_client, settings, sessions)
    await ingest_tutorial(tenant)
    document = (await real_client.get("/openapi.json")).json()

    search = first_example(document, "/api/rag/search")
    reply = await real_client.post("/api/rag/search", json=search, headers=tenant.headers)
    assert reply.status_code == 200, reply.text
    chunks = reply.json()["chunks"]
    assert chunks, reply.json()
    assert "kept for 30 days" in chunks[0]["content"]
    assert {chunk["external_id"] for chunk in chunks} <= {"backups.md", "on-call.md"}

    context = first_example(document, "/api/rag/context")
    reply = await real_client.post("/api/rag/context", json=context, headers=tenant.headers)
    assert reply.status_code == 200, reply.text
    assert "02:00 UTC" in reply.json()["context"]
