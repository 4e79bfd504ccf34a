"""Tenant-scoped transactions.

A session opened with `info={"tenant_id": ...}` sets `app.tenant_id` at the start of every
transaction, transaction-locally (`set_config(..., true)`), so a pooled connection never
carries a tenant into the next request. Row-level security does the rest: no tenant set
means no rows. `info={"ef_search": n}` sets `hnsw.ef_search` the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import Connection, event, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, SessionTransaction

SessionMaker = async_sessionmaker[AsyncSession]


@event.listens_for(Session, "after_begin")
def _scope_to_tenant(session: Session, _tx: SessionTransaction, conn: Connection) -> None:
    if (tenant_id := session.info.get("tenant_id")) is not None:
        conn.execute(text("select set_config('app.tenant_id', :t, true)"), {"t": str(tenant_id)})


@asynccontextmanager
async def tenant_transaction(sessions: SessionMaker, tenant_id: str) -> AsyncIterator[AsyncSession]:
    """One transaction scoped to `tenant_id`; commits on success, rolls back on error."""
    async with sessions(info={"tenant_id": tenant_id}) as session, session.begin():
        yield session


@asynccontextmanager
async def registry_transaction(sessions: SessionMaker) -> AsyncIterator[AsyncSession]:
    """A transaction with no tenant: it sees the tenant registry and no tenant-owned row."""
    async with sessions() as session, session.begin():
        yield session
