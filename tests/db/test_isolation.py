"""Row-level security, checked as the runtime role with real commits."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine, create_sessionmaker
from app.db.models import Chunk, Collection, Document
from app.db.tenancy import SessionMaker, registry_transaction, tenant_transaction
from app.tenants import create_tenant
from tests.conftest import DIMENSIONS, DatabaseUrls, allow_fan_out

pytestmark = pytest.mark.on_citus


@dataclass(frozen=True, slots=True)
class Seeded:
    tenant_id: str
    collection_id: uuid.UUID
    document_id: uuid.UUID
    chunk_id: uuid.UUID


async def _seed(sessions: SessionMaker, tenant_id: str) -> Seeded:
    async with registry_transaction(sessions) as session:
        await create_tenant(session, tenant_id)
    ids = Seeded(tenant_id, uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
    async with tenant_transaction(sessions, tenant_id) as session:
        session.add(Collection(id=ids.collection_id, tenant_id=tenant_id, name="default"))
        await session.flush()
        session.add(_document(ids))
        await session.flush()
        session.add(_chunk(ids))
    return ids


def _document(ids: Seeded) -> Document:
    return Document(
        id=ids.document_id,
        tenant_id=ids.tenant_id,
        collection_id=ids.collection_id,
        external_id="doc-1",
        title="A document",
        source_type="text",
        content_hash="0" * 64,
        chunk_count=1,
    )


def _chunk(ids: Seeded, *, chunk_id: uuid.UUID | None = None, index: int = 0) -> Chunk:
    return Chunk(
        id=chunk_id or ids.chunk_id,
        tenant_id=ids.tenant_id,
        document_id=ids.document_id,
        collection_id=ids.collection_id,
        chunk_index=index,
        content=f"secret text of {ids.tenant_id}",
        token_count=4,
        embedding=[0.1] * DIMENSIONS,
        embedding_model="test",
        embedded_text_hash="0" * 64,
    )


@pytest.fixture(scope="module")
async def committed(app_engine: AsyncEngine) -> tuple[Seeded, Seeded]:
    sessions = create_sessionmaker(app_engine)
    suffix = uuid.uuid4().hex[:8]
    return await _seed(sessions, f"iso-a-{suffix}"), await _seed(sessions, f"iso-b-{suffix}")


async def _count_all(sessions: SessionMaker, tenant_id: str | None) -> dict[str, int]:
    info = {} if tenant_id is None else {"tenant_id": tenant_id}
    async with sessions(info=info) as session, session.begin():
        await allow_fan_out(session)  # every tenant's rows, on purpose
        return {
            model.__tablename__: (await session.scalar(select(func.count()).select_from(model)))
            or 0
            for model in (Collection, Document, Chunk)
        }


async def test_without_a_tenant_nothing_is_visible(
    app_engine: AsyncEngine, committed: tuple[Seeded, Seeded]
) -> None:
    counts = await _count_all(create_sessionmaker(app_engine), None)
    assert counts == {"collections": 0, "documents": 0, "chunks": 0}


async def test_without_a_tenant_inserts_are_refused(
    app_engine: AsyncEngine, committed: tuple[Seeded, Seeded]
) -> None:
    a, _ = committed
    with pytest.raises(DBAPIError, match="row-level security"):
        async with registry_transaction(create_sessionmaker(app_engine)) as session:
            session.add(Collection(id=uuid.uuid4(), tenant_id=a.tenant_id, name="sneaky"))


async def test_a_tenant_sees_only_its_own_rows(
    app_engine: AsyncEngine, committed: tuple[Seeded, Seeded]
) -> None:
    a, b = committed
    # SQL text: the ORM's statements also name the session's tenant (db/tenancy.py), and
    # what is tested here is that row-level security alone keeps B's rows away
    async with tenant_transaction(create_sessionmaker(app_engine), a.tenant_id) as session:
        await allow_fan_out(session)
        tenants = set((await session.scalars(text("select tenant_id from chunks"))).all())
        assert tenants == {a.tenant_id}
        found = "select count(*) from {} where id = :id"
        assert await session.scalar(text(found.format("chunks")), {"id": b.chunk_id}) == 0
        assert await session.scalar(text(found.format("documents")), {"id": b.document_id}) == 0


async def test_a_tenant_cannot_update_or_delete_another_tenants_rows(
    app_engine: AsyncEngine, committed: tuple[Seeded, Seeded]
) -> None:
    a, b = committed
    sessions = create_sessionmaker(app_engine)
    async with tenant_transaction(sessions, a.tenant_id) as session:
        await allow_fan_out(session)
        changed = await session.execute(
            text("update documents set title = 'pwned' where id = :id"), {"id": b.document_id}
        )
        deleted = await session.execute(
            text("delete from chunks where id = :id"), {"id": b.chunk_id}
        )
        assert changed.rowcount == 0  # type: ignore[attr-defined]
        assert deleted.rowcount == 0  # type: ignore[attr-defined]
    async with tenant_transaction(sessions, b.tenant_id) as session:
        document = await session.get(Document, (b.tenant_id, b.document_id))
        assert document is not None
        assert document.title == "A document"
        assert await session.get(Chunk, (b.tenant_id, b.chunk_id)) is not None


async def test_a_tenant_cannot_insert_rows_for_another_tenant(
    app_engine: AsyncEngine, committed: tuple[Seeded, Seeded]
) -> None:
    a, b = committed
    with pytest.raises(DBAPIError, match="row-level security"):
        async with tenant_transaction(create_sessionmaker(app_engine), a.tenant_id) as session:
            session.add(_chunk(b, chunk_id=uuid.uuid4(), index=7))


async def test_tenant_setting_does_not_survive_the_transaction(
    database: DatabaseUrls, committed: tuple[Seeded, Seeded]
) -> None:
    a, _ = committed
    engine = create_engine(database.app_url, pool_size=1)
    try:
        sessions = create_sessionmaker(engine)
        async with tenant_transaction(sessions, a.tenant_id) as session:
            pid = await session.scalar(text("select pg_backend_pid()"))
            assert await session.scalar(select(func.count()).select_from(Chunk)) == 1
        async with registry_transaction(sessions) as session:
            assert await session.scalar(text("select pg_backend_pid()")) == pid  # same connection
            setting = await session.scalar(text("select current_setting('app.tenant_id', true)"))
            assert setting in ("", None)
        assert await _count_all(sessions, None) == {"collections": 0, "documents": 0, "chunks": 0}
    finally:
        await engine.dispose()


async def test_every_tenant_table_has_forced_rls_with_policies(app_engine: AsyncEngine) -> None:
    query = text(
        """
        select c.relname, c.relrowsecurity, c.relforcerowsecurity,
               (select count(*) from pg_policies p
                 where p.tablename = c.relname and p.qual like '%app.tenant_id%'
                   and p.with_check like '%app.tenant_id%') as policies
          from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'public' and c.relkind in ('r', 'p')
           and exists (select 1 from pg_attribute a
                        where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped)
        """
    )
    async with app_engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    assert {row.relname for row in rows} >= {
        *("collections", "documents", "chunks", "audit_log", "tenant_usage")
    }
    for row in rows:
        assert row.relrowsecurity, f"RLS not enabled on {row.relname}"
        assert row.relforcerowsecurity, f"RLS not forced on {row.relname}"
        assert row.policies >= 1, f"no tenant policy on {row.relname}"


async def test_runtime_role_cannot_bypass_rls(app_engine: AsyncEngine) -> None:
    query = text(
        """
        select r.rolsuper, r.rolbypassrls,
               exists (select 1 from pg_tables t
                        where t.schemaname = 'public' and t.tableowner = current_user) as owns
          from pg_roles r where r.rolname = current_user
        """
    )
    async with app_engine.connect() as conn:
        row = (await conn.execute(query)).one()
    assert (row.rolsuper, row.rolbypassrls, row.owns) == (False, False, False)


async def test_runtime_role_cannot_rewrite_the_audit_log(app_engine: AsyncEngine) -> None:
    query = text(
        "select has_table_privilege(current_user, 'audit_log', 'INSERT'),"
        " has_table_privilege(current_user, 'audit_log', 'UPDATE'),"
        " has_table_privilege(current_user, 'audit_log', 'DELETE')"
    )
    async with app_engine.connect() as conn:
        insert, update, delete = (await conn.execute(query)).one()
    assert (insert, update, delete) == (True, False, False)
