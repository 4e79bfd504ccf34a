"""POST /api/rag/collections/{name}/sync: a collection made to hold what its source holds
now (added, updated, unchanged, deleted, missing), its guards and bad input, and the signed
receipts of syncs and deletions (GET /api/rag/receipts/{id})."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from httpx import AsyncClient, Response
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from app.auth import issue_token
from app.db.engine import create_sessionmaker
from app.db.models import Bm25Corpus, Bm25Posting, Chunk, Document
from app.db.tenancy import SessionMaker, tenant_transaction
from app.settings import Settings
from tests.api.calls import DOCUMENTS, assert_problem, keyword_hits, listing
from tests.conftest import DatabaseUrls, TenantClient, app_client, new_tenant, token_for
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.on_citus

SECRET = "whsec_" + base64.b64encode(b"receipts are signed with this!!!").decode()
SYNC = "/api/rag/collections/{}/sync"

Json = dict[str, Any]


@pytest.fixture
async def signing(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[AsyncClient]:
    signed = settings.model_copy(update={"webhook_secret": SecretStr(SECRET)})
    async with app_client(signed, sessions, embedder) as http:
        yield http


@pytest.fixture
async def tenant(signing: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(signing, settings, sessions)


def page(external_id: str, text: str, **fields: Any) -> Json:
    return {"external_id": external_id, "content": text, **fields}


async def sync(
    tenant: TenantClient, documents: list[Json], collection: str = "help", **body: Any
) -> Response:
    return await tenant.http.post(
        SYNC.format(collection), json={"documents": documents, **body}, headers=tenant.headers
    )


async def synced(tenant: TenantClient, documents: list[Json], **body: Any) -> Json:
    response = await sync(tenant, documents, **body)
    assert response.status_code == 200, response.text
    reply: Json = response.json()
    return reply


async def external_ids(tenant: TenantClient, collection: str = "help") -> dict[str, Json]:
    found = await listing(tenant, collection=collection, limit=200)
    return {item["external_id"]: item for item in found["items"]}


async def receipt(tenant: TenantClient, receipt_id: str) -> tuple[Json, Response]:
    response = await tenant.http.get(f"/api/rag/receipts/{receipt_id}", headers=tenant.headers)
    assert response.status_code == 200, response.text
    body = Webhook(SECRET).verify(response.content, dict(response.headers))
    return body, response


HELP = [
    page("backups.md", "Backups are kept for 30 days in the vault.", version="v2"),
    page("login.md", "Sign in with your badge and a one-time code.", version="a1"),
    page("printers.md", "Printers on floor two need the quokkaspool driver.", version="p1"),
]


async def test_a_sync_adds_updates_keeps_and_deletes_to_match_the_source(
    tenant: TenantClient,
) -> None:
    first = await synced(tenant, HELP)
    assert first["added"] == ["backups.md", "login.md", "printers.md"]
    assert first["counts"] == {
        "added": 3, "updated": 0, "unchanged": 0, "deleted": 0, "missing": 0, "failed": 0,
    }  # fmt: skip
    assert (await external_ids(tenant))["backups.md"]["version"] == "v2"
    assert await keyword_hits(tenant, "quokkaspool")

    second = await synced(
        tenant,
        [
            page("backups.md", "Backups are kept for 45 days in the vault.", version="v3"),
            {"external_id": "login.md", "version": "a1"},  # a reference, same version
        ],
    )
    assert second["updated"] == ["backups.md"]
    assert second["unchanged"] == ["login.md"]
    assert second["deleted"] == ["printers.md"]
    assert second["added"] == second["missing"] == second["failed"] == []
    assert set(await external_ids(tenant)) == {"backups.md", "login.md"}
    assert await keyword_hits(tenant, "quokkaspool") == []  # the removed page answers no more

    body, response = await receipt(tenant, second["receipt"]["receipt_id"])
    assert second["receipt"]["url"] == f"/api/rag/receipts/{body['receipt_id']}"
    assert response.headers["webhook-id"] == body["receipt_id"]
    assert (body["kind"], body["collection"], body["tenant_id"]) == (
        "sync",
        "help",
        tenant.tenant_id,
    )
    [updated] = body["updated"]
    assert (updated["external_id"], updated["version"]) == ("backups.md", "v3")
    assert len(updated["content_hash"]) == 64
    [deleted] = body["deleted"]
    assert (deleted["external_id"], deleted["version"], deleted["chunks"]) == (
        "printers.md",
        "p1",
        1,
    )
    erased = body["erased"]
    assert erased["gone"] is True
    assert erased["remaining"] == {"chunks": 0, "postings": 0}
    assert erased["chunks"] == 1
    assert erased["keyword_postings"] > 0
    stats = erased["keyword_statistics"]
    assert stats["chunks_after"] == stats["chunks_before"] - 1


async def test_nothing_of_a_deleted_document_stays_in_the_tables(
    tenant: TenantClient, sessions: SessionMaker
) -> None:
    await synced(tenant, HELP)
    async with tenant_transaction(sessions, tenant.tenant_id) as session:
        printers = await session.scalar(
            select(Document.id).where(Document.external_id == "printers.md")
        )
        chunk_ids = list(
            await session.scalars(select(Chunk.id).where(Chunk.document_id == printers))
        )
    assert chunk_ids
    await synced(tenant, HELP[:2])
    async with tenant_transaction(sessions, tenant.tenant_id) as session:
        assert await session.scalar(select(func.count()).where(Document.id == printers)) == 0
        assert (
            await session.scalar(
                select(func.count()).select_from(Chunk).where(Chunk.document_id == printers)
            )
            == 0
        )
        assert (
            await session.scalar(
                select(func.count())
                .select_from(Bm25Posting)
                .where(Bm25Posting.chunk_id.in_(chunk_ids))
            )
            == 0
        )
        corpus = await session.scalar(select(Bm25Corpus.chunks))
        live = await session.scalar(select(func.count()).select_from(Chunk))
    assert corpus == live  # the keyword statistics count the chunks that are left


async def test_references_the_service_lacks_or_holds_at_another_version_are_missing(
    tenant: TenantClient,
) -> None:
    await synced(tenant, HELP)
    reply = await synced(
        tenant,
        [
            {"external_id": "backups.md", "version": "v9"},  # stored at v2
            {"external_id": "login.md", "version": "a1"},
            {"external_id": "printers.md", "version": "p1"},
            {"external_id": "new.md", "version": "n1"},  # never sent
        ],
    )
    assert reply["missing"] == ["backups.md", "new.md"]
    assert reply["unchanged"] == ["login.md", "printers.md"]
    assert reply["deleted"] == []
    stored = await external_ids(tenant)
    assert stored["backups.md"]["version"] == "v2"  # left as it is: the caller sends it in full


async def test_a_dry_run_tells_the_same_and_changes_nothing(tenant: TenantClient) -> None:
    await synced(tenant, HELP)
    before = await external_ids(tenant)
    changes = [
        page("backups.md", "Backups are kept for 45 days.", version="v3"),
        HELP[1],
        page("new.md", "A new page about quokkas."),
    ]
    dry = await synced(tenant, changes, dry_run=True)
    assert dry["dry_run"] is True
    assert dry["receipt"] is None
    assert await external_ids(tenant) == before
    real = await synced(tenant, changes)
    for outcome in ("added", "updated", "unchanged", "deleted", "missing"):
        assert dry[outcome] == real[outcome], outcome
    assert (real["added"], real["updated"], real["deleted"]) == (
        ["new.md"],
        ["backups.md"],
        ["printers.md"],
    )


async def test_an_empty_list_is_refused_unless_said_explicitly(tenant: TenantClient) -> None:
    await synced(tenant, HELP)
    problem = assert_problem(await sync(tenant, []), 422)
    assert "allow_empty" in problem["detail"]
    assert len(await external_ids(tenant)) == 3
    emptied = await synced(tenant, [], allow_empty=True)
    assert emptied["deleted"] == ["backups.md", "login.md", "printers.md"]
    assert await external_ids(tenant) == {}


@pytest.mark.parametrize("limit", [1, 0.5])
async def test_more_deletions_than_allowed_is_a_409_and_nothing_changes(
    tenant: TenantClient, limit: float
) -> None:
    await synced(tenant, HELP)
    problem = assert_problem(await sync(tenant, HELP[:1], max_deletions=limit), 409)
    assert "would delete 2 of 3" in problem["detail"]
    assert len(await external_ids(tenant)) == 3
    allowed = await synced(tenant, HELP[:1], max_deletions=2)
    assert allowed["deleted"] == ["login.md", "printers.md"]


@pytest.mark.parametrize(
    ("documents", "collection", "body", "named"),
    [
        ([HELP[0], page("backups.md", "again")], "help", {}, "documents[1]"),
        ([{"external_id": "a.md"}], "help", {}, "version"),
        ([{"content": "no id"}], "help", {}, "external_id"),
        ([{"external_id": "a.md", "version": ""}], "help", {}, "version"),
        ([HELP[0]], "x" * 200, {}, "collection"),
        ([{**HELP[0], "collection": "other"}], "help", {}, "documents[0]"),
        ([HELP[0]], "help", {"max_deletions": 1.5}, "max_deletions"),
        ([HELP[0]], "help", {"max_deletions": -1}, "max_deletions"),
        ([{**HELP[0], "version": "v\u0000"}], "help", {}, "version"),
    ],
)
async def test_bad_input_is_a_422_naming_the_entry_and_nothing_changes(
    tenant: TenantClient, documents: list[Json], collection: str, body: Json, named: str
) -> None:
    await synced(tenant, HELP)
    problem = assert_problem(await sync(tenant, documents, collection=collection, **body), 422)
    assert named in json.dumps(problem)
    assert len(await external_ids(tenant)) == 3


async def test_a_token_without_ingest_scope_may_not_sync(
    tenant: TenantClient, settings: Settings
) -> None:
    reader = {"Authorization": f"Bearer {token_for(settings, tenant.tenant_id, 'rag:search')}"}
    response = await tenant.http.post(SYNC.format("help"), json={"documents": HELP}, headers=reader)
    assert_problem(response, 403)


async def test_documents_the_caller_may_not_see_are_neither_listed_nor_deleted(
    tenant: TenantClient, settings: Settings
) -> None:
    private = page("salaries.md", "Salaries are reviewed in March.", access=["group:hr"])
    hr_token = issue_token(
        settings,
        tenant_id=tenant.tenant_id,
        subject="hr-lead",
        scopes=["rag:search", "rag:ingest"],
        ttl_seconds=300,
        groups=["hr"],
    )
    hr = {"Authorization": f"Bearer {hr_token}"}
    response = await tenant.http.post(
        SYNC.format("help"), json={"documents": [*HELP, private]}, headers=hr
    )
    assert response.status_code == 200, response.text
    assert response.json()["counts"]["added"] == 4
    reply = await synced(tenant, HELP[:1])  # a caller outside group:hr
    assert reply["deleted"] == ["login.md", "printers.md"]
    after = await tenant.http.get(DOCUMENTS, params={"collection": "help"}, headers=hr)
    assert {item["external_id"] for item in after.json()["items"]} == {"backups.md", "salaries.md"}


async def test_a_deletion_has_a_receipt_another_tenant_cannot_read(
    tenant: TenantClient, signing: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    await synced(tenant, HELP)
    printers = (await external_ids(tenant))["printers.md"]
    deleted = await tenant.http.delete(
        f"{DOCUMENTS}/{printers['document_id']}", headers=tenant.headers
    )
    assert deleted.status_code == 204
    body, _ = await receipt(tenant, deleted.headers["Receipt-Id"])
    assert body["kind"] == "delete"
    assert [d["external_id"] for d in body["deleted"]] == ["printers.md"]
    assert body["erased"]["gone"] is True
    other = await new_tenant(signing, settings, sessions)
    foreign = await other.http.get(
        f"/api/rag/receipts/{deleted.headers['Receipt-Id']}", headers=other.headers
    )
    assert_problem(foreign, 404)


async def test_a_changed_access_list_moves_the_document_instead_of_copying_it(
    tenant: TenantClient, settings: Settings
) -> None:
    await synced(tenant, HELP)
    before = (await external_ids(tenant))["login.md"]
    mine = f"user:{'tester'}"
    moved = await synced(tenant, [HELP[0], {**HELP[1], "access": [mine]}, HELP[2]])
    assert moved["updated"] == ["login.md"]
    assert moved["deleted"] == []
    after = (await external_ids(tenant))["login.md"]
    assert (after["document_id"], after["access"]) == (before["document_id"], [mine])


async def test_a_tenant_deletion_has_a_receipt_that_outlives_the_tenant(
    app_engine: AsyncEngine, settings: Settings, embedder: WordHashEmbedder, database: DatabaseUrls
) -> None:
    committed = create_sessionmaker(app_engine)  # read back as the superuser, so committed
    signed = settings.model_copy(update={"webhook_secret": SecretStr(SECRET)})
    async with app_client(signed, committed, embedder) as http:
        tenant = await new_tenant(http, settings, committed)
        await synced(tenant, HELP)
        await synced(tenant, [page("faq.md", "Quokkas answer the phone.")], collection="faq")
        operator = await new_tenant(http, settings, committed, scopes="rag:admin")
        admin = operator.headers  # an admin token of another tenant: this one's are refused
        url = f"/api/admin/tenants/{tenant.tenant_id}"
        assert (await http.post(f"{url}/suspend", headers=admin)).status_code == 200
        deleted = await http.delete(url, params={"confirm": tenant.tenant_id}, headers=admin)
        assert deleted.status_code == 204, deleted.text
        receipt_id = deleted.headers["Receipt-Id"]
        response = await http.get(f"{url}/receipts/{receipt_id}", headers=admin)
        assert response.status_code == 200, response.text
        foreign = await http.get(f"/api/admin/tenants/other/receipts/{receipt_id}", headers=admin)
        assert_problem(foreign, 404)

    body = Webhook(SECRET).verify(response.content, dict(response.headers))
    assert (body["kind"], body["tenant_id"], body["collection"]) == (
        "tenant_delete",
        tenant.tenant_id,
        None,
    )
    assert body["collections"] == [
        {"collection": "faq", "documents": 1, "chunks": 1},
        {"collection": "help", "documents": 3, "chunks": 3},
    ]
    erased = body["erased"]
    assert erased["rows"]["documents"] == 4
    assert erased["rows"]["bm25_postings"] > 0
    assert set(erased["remaining"].values()) == {0}
    assert erased["gone"] is True
    # read as the superuser, past row-level security: nothing of the tenant's data is left
    url_of = make_url(database.owner_url)
    superuser = make_url(database.superuser_url).set(database=url_of.database)
    connection = await asyncpg.connect(superuser.render_as_string(hide_password=False))
    try:
        for table in erased["rows"]:
            left = await connection.fetchval(
                f"select count(*) from {table} where tenant_id = $1", tenant.tenant_id
            )
            assert left == 0, table
        kept = await connection.fetchval(
            "select count(*) from receipts where tenant_id = $1", tenant.tenant_id
        )
    finally:
        await connection.close()
    assert kept == 3  # the two syncs' and the deletion's
    async with app_client(signed, committed, embedder) as http:
        # the id created again starts without the receipts of the tenant that held it
        await http.post("/api/admin/tenants", json={"id": tenant.tenant_id}, headers=admin)
        again = await http.get(f"/api/rag/receipts/{receipt_id}", headers=tenant.headers)
        assert_problem(again, 404)
        still = await http.get(f"{url}/receipts/{receipt_id}", headers=admin)  # the admin's
        assert still.content == response.content


async def test_two_syncs_of_one_collection_at_once_run_one_after_the_other(
    app_engine: AsyncEngine, settings: Settings, embedder: WordHashEmbedder
) -> None:
    committed = create_sessionmaker(app_engine)  # two transactions at once: committed
    first = [page(f"a{n}.md", f"Alpacas graze on hill {n}.") for n in range(3)]
    second = [page(f"b{n}.md", f"Bison roam the plain {n}.") for n in range(2)]
    async with app_client(settings, committed, embedder) as http:
        tenant = await new_tenant(http, settings, committed, tier="enterprise")
        for _ in range(3):
            replies = await asyncio.gather(synced(tenant, first), synced(tenant, second))
            names = set(await external_ids(tenant))
            # the one that ran second planned against what the first left: exactly its own
            # documents remain, and it deleted every document the other one wrote
            assert names in ({"a0.md", "a1.md", "a2.md"}, {"b0.md", "b1.md"}), names
            last = replies[0] if names == {e["external_id"] for e in first} else replies[1]
            other = replies[1] if last is replies[0] else replies[0]
            assert set(other["added"]) | set(other["updated"]) | set(other["unchanged"]) <= set(
                last["deleted"]
            ) | set(last["unchanged"]), (last, other)


async def test_receipts_are_listed_newest_first_with_their_counts(tenant: TenantClient) -> None:
    first = await synced(tenant, HELP)
    second = await synced(tenant, HELP[:2])
    document_id = (await external_ids(tenant))["login.md"]["document_id"]
    deleted = await tenant.http.delete(f"{DOCUMENTS}/{document_id}", headers=tenant.headers)
    assert deleted.status_code == 204, deleted.text
    listed = await tenant.http.get("/api/rag/receipts", headers=tenant.headers)
    assert listed.status_code == 200, listed.text
    page = listed.json()
    assert page["total"] == 3
    shown = [
        (r["receipt_id"], r["kind"], r["added"], r["updated"], r["deleted"], r["signed"])
        for r in page["items"]
    ]
    assert shown == [
        (deleted.headers["Receipt-Id"], "delete", 0, 0, 1, True),
        (second["receipt"]["receipt_id"], "sync", 0, 0, 1, True),
        (first["receipt"]["receipt_id"], "sync", 3, 0, 0, True),
    ]
    syncs = await tenant.http.get(
        "/api/rag/receipts", params={"kind": "sync", "limit": 1}, headers=tenant.headers
    )
    assert [r["receipt_id"] for r in syncs.json()["items"]] == [second["receipt"]["receipt_id"]]
    assert syncs.json()["total"] == 2
    assert_problem(
        await tenant.http.get("/api/rag/receipts", params={"kind": "x"}, headers=tenant.headers),
        422,
    )
