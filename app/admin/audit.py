"""The audit log of admin actions: who, when, what, and the target before and after.

An entry is written in the same transaction as the change it describes, so a change without
its entry (or an entry without its change) cannot be committed. The runtime role may only
insert and read the table (migration 0005).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import AuditEntry, Tenant


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acted: a token's subject and tenant, or `cli:<user>` on the command line."""

    subject: str
    tenant_id: str | None = None


def tenant_snapshot(tenant: Tenant) -> dict[str, Any]:
    return {
        "id": tenant.id,
        "name": tenant.name,
        "tier": tenant.tier,
        "status": tenant.status,
    }


async def record(
    session: AsyncSession,
    actor: Actor,
    action: str,
    *,
    tenant_id: str | None,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> AuditEntry:
    entry = AuditEntry(
        actor_subject=actor.subject,
        actor_tenant_id=actor.tenant_id,
        action=action,
        tenant_id=tenant_id,
        before=dict(before) if before is not None else None,
        after=dict(after) if after is not None else None,
    )
    session.add(entry)
    await session.flush()
    await session.refresh(entry)  # `at` is set by the server
    return entry


async def entries(
    session: AsyncSession,
    *,
    tenant_id: str | None = None,
    action: str | None = None,
    actor: str | None = None,
    limit: int,
    offset: int,
) -> tuple[Sequence[AuditEntry], int]:
    """The newest entries first, filtered; and how many match in all."""
    stmt = select(AuditEntry)
    if tenant_id is not None:
        stmt = stmt.where(AuditEntry.tenant_id == tenant_id)
    if action is not None:
        stmt = stmt.where(AuditEntry.action == action)
    if actor is not None:
        stmt = stmt.where(AuditEntry.actor_subject == actor)
    total = await session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    found = await session.scalars(stmt.order_by(AuditEntry.id.desc()).limit(limit).offset(offset))
    return found.all(), total
