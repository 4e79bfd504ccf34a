"""Document access lists in the database: the policies, the chunk/document foreign key, who
reads when nobody is named, the exact plan for small visible sets, migration 0008 both ways."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.state import plans_of_sessions
from app.db.tenancy import SessionMaker, reading_as, tenant_transaction, transaction_settings
from app.ingest.catalog import DocumentChange, update_document
from app.ingest.documents import ingest_document
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.permissions import EVERY_DOCUMENT, NO_READERS, Readers, normalized_access
from app.retrieval.visibility import access_lists_matter, known_plan, visible_scope
from tests.conftest import (
    DatabaseUrls,
    registered_tenant,
    small_chunker,
)
from tests.db.migrations import down_and_up
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.on_citus

HR = Readers(frozenset({"user:carol", "group:hr"}))


async def _seed(sessions: SessionMaker, embedder: WordHashEmbedder) -> str:
    tenant_id = await registered_tenant(sessions)
    writer = reading_as(sessions, EVERY_DOCUMENT)
    for name, access in (("open", ()), ("hr", ("group:hr",)), ("board", ("group:board",))):
        await ingest_document(
            writer,
            embedder,
            chunker=small_chunker(),
            tenant_id=tenant_id,
            document=DocumentInput(
                content=f"The {name} report.",
                source_type=SourceType.TEXT,
                title=name,
                external_id=name,
                access=access,
            ),
        )
    return tenant_id


async def _titles(sessions: SessionMaker, tenant_id: str) -> set[str]:
    async with tenant_transaction(sessions, tenant_id) as session:
        rows = await session.execute(
            text(
                "select d.title from documents d join chunks c"
                " on c.tenant_id = d.tenant_id and c.document_id = d.id where d.tenant_id = :t"
            ),
            {"t": tenant_id},
        )
        return {row[0] for row in rows}


async def test_each_transaction_reads_as_its_readers_and_none_means_unrestricted_only(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await _seed(sessions, embedder)
    assert await _titles(sessions, tenant_id) == {"open"}
    assert await _titles(reading_as(sessions, NO_READERS), tenant_id) == {"open"}
    assert await _titles(reading_as(sessions, HR), tenant_id) == {"open", "hr"}
    assert await _titles(reading_as(sessions, EVERY_DOCUMENT), tenant_id) == {
        "open",
        "hr",
        "board",
    }
    # the settings are always written for a tenant session, so a reused connection (or a
    # savepoint) never keeps the previous transaction's principals
    assert transaction_settings({"tenant_id": tenant_id}) == {
        "app.tenant_id": tenant_id,
        "app.principals": "{}",
        "app.all_documents": "",
    }
    assert await _titles(sessions, tenant_id) == {"open"}


async def test_a_chunk_cannot_carry_another_access_list_than_its_document(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await _seed(sessions, embedder)
    everything = reading_as(sessions, EVERY_DOCUMENT)
    with pytest.raises(IntegrityError):
        async with tenant_transaction(everything, tenant_id) as session:
            await session.execute(
                text(
                    "update chunks set access = '{}' where tenant_id = :t and access = '{group:hr}'"
                ),
                {"t": tenant_id},
            )
    # a document's list cannot change without its chunks' ...
    with pytest.raises(IntegrityError, match="fk_chunks_tenant_id_documents"):
        async with tenant_transaction(everything, tenant_id) as session:
            await session.execute(
                text(
                    "update documents set access = '{group:legal}'"
                    " where tenant_id = :t and title = 'hr'"
                ),
                {"t": tenant_id},
            )
    # ... and the document's update changes both in one statement
    async with tenant_transaction(everything, tenant_id) as session:
        document_id = await session.scalar(
            text("select id from documents where tenant_id = :t and title = 'hr'"), {"t": tenant_id}
        )
        await update_document(
            session, document_id, DocumentChange(access=("group:legal",)), readers=EVERY_DOCUMENT
        )
        chunks = await session.scalar(
            text(
                "select array_agg(distinct c.access::text) from chunks c"
                " join documents d on d.tenant_id = c.tenant_id and d.id = c.document_id"
                " where d.tenant_id = :t and d.title = 'hr'"
            ),
            {"t": tenant_id},
        )
    assert chunks == ["{group:legal}"]


async def test_a_writer_cannot_store_a_document_it_could_not_see(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await _seed(sessions, embedder)
    with pytest.raises(Exception, match="row-level security"):
        async with tenant_transaction(reading_as(sessions, HR), tenant_id) as session:
            await session.execute(
                text(
                    "update documents set access = '{group:board}'"
                    " where tenant_id = :t and title = 'hr'"
                ),
                {"t": tenant_id},
            )


async def test_small_visible_sets_get_the_exact_plan(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await _seed(sessions, embedder)
    model, plans = embedder.model_id, plans_of_sessions(sessions)
    assert known_plan(plans, EVERY_DOCUMENT, tenant_id=tenant_id, model=model) is False  # the graph
    assert known_plan(plans, HR, tenant_id=tenant_id, model=model) is None  # nothing known yet
    assert await access_lists_matter(reading_as(sessions, HR), tenant_id)
    assert not await access_lists_matter(reading_as(sessions, EVERY_DOCUMENT), tenant_id)
    assert known_plan(plans, HR, tenant_id=tenant_id, model=model) is None  # not counted yet
    for readers, conditions, exact in ((EVERY_DOCUMENT, 0, False), (HR, 1, True)):
        async with tenant_transaction(reading_as(sessions, readers), tenant_id) as session:
            scope = await visible_scope(
                session, tenant_id=tenant_id, model=model, nearest=True, listed=True
            )
        assert (len(scope.conditions), scope.exact) == (conditions, exact)
    assert known_plan(plans, HR, tenant_id=tenant_id, model=model) is True  # counted: a few chunks
    async with tenant_transaction(reading_as(sessions, HR), tenant_id) as session:
        keyword = await visible_scope(
            session, tenant_id=tenant_id, model=model, nearest=False, listed=True
        )
    assert not keyword.exact  # no vector leg, nothing to make exact


async def test_a_tenant_without_access_lists_needs_no_count(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """Every member sees the whole tenant: the planner's usual plans, no count per caller."""
    tenant_id = await registered_tenant(sessions)
    await ingest_document(
        sessions,
        embedder,
        chunker=small_chunker(),
        tenant_id=tenant_id,
        document=DocumentInput(
            content="Open.", source_type=SourceType.TEXT, title="open", external_id="open"
        ),
    )
    model, plans = embedder.model_id, plans_of_sessions(sessions)
    assert not await access_lists_matter(reading_as(sessions, HR), tenant_id)
    assert known_plan(plans, HR, tenant_id=tenant_id, model=model) is False
    async with tenant_transaction(reading_as(sessions, HR), tenant_id) as session:
        scope = await visible_scope(
            session, tenant_id=tenant_id, model=model, nearest=True, listed=False
        )
    assert not scope.exact
    assert plans.visible.get((tenant_id, model, HR.principals)) is None


async def test_the_planner_condition_keeps_unrestricted_chunks_when_there_are_some(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await _seed(sessions, embedder)
    async with tenant_transaction(reading_as(sessions, HR), tenant_id) as session:
        [with_open] = (
            await visible_scope(
                session, tenant_id=tenant_id, model=embedder.model_id, nearest=False, listed=True
            )
        ).conditions
    assert "= :" in str(with_open)  # access = '{}' OR access && principals
    async with tenant_transaction(reading_as(sessions, EVERY_DOCUMENT), tenant_id) as session:
        await session.execute(
            text("delete from documents where tenant_id = :t and access = '{}'"), {"t": tenant_id}
        )
    async with tenant_transaction(reading_as(sessions, HR), tenant_id) as session:
        [listed] = (
            await visible_scope(
                session, tenant_id=tenant_id, model=embedder.model_id, nearest=False, listed=True
            )
        ).conditions
    assert " OR " not in str(listed)


def test_access_lists_are_normalized_and_checked() -> None:
    assert normalized_access(["group:hr", "user:a@b.c", "group:hr"]) == ("group:hr", "user:a@b.c")
    for bad in (["hr"], ["group:"], ["group: x"], ["team:x"], [f"group:{'x' * 130}"]):
        with pytest.raises(ValueError, match="principal"):
            normalized_access(bad)
    with pytest.raises(ValueError, match="at most"):
        normalized_access([f"group:g{i}" for i in range(17)])
    assert HR.may_see([])
    assert HR.may_see(["group:hr", "group:x"])
    assert not HR.may_see(["group:board"])
    assert Readers.from_json(HR.to_json()) == HR
    assert Readers.from_json("nonsense") == NO_READERS


@pytest.mark.slow
@pytest.mark.single_node  # a database of its own, migrated down and up
async def test_migration_0008_downgrades_and_upgrades_again(database: DatabaseUrls) -> None:
    async def no_access_columns(conn: AsyncConnection) -> None:
        columns = await conn.scalar(
            text(
                "select count(*) from information_schema.columns"
                " where table_name in ('documents', 'chunks') and column_name = 'access'"
            )
        )
        assert columns == 0

    async def policy_of_today(conn: AsyncConnection) -> None:
        policy = await conn.scalar(text("select qual from pg_policies where tablename = 'chunks'"))
        assert "rag_principals" in str(policy)
        assert "rag_every_list" in str(policy)  # 0009: every arm an index condition

    await down_and_up(database, to="0007", after_down=no_access_columns, after_up=policy_of_today)
