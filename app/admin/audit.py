"""The audit log of admin actions: who, when, what, and the target before and after.

An entry is written in the same transaction as the change it describes, so a change without
its entry (or an entry without its change) cannot be committed. The runtime role may only
insert and read the table (migration 0005), and only in a ledger transaction or its own
tenant's (row-level security, migration 0013).
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.tokens import Principal
from app.db.models import AuditEntry, Tenant


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acted: a bearer token (its subject, tenant and the id of the key that verified it)
    or an operator on the service's machine (`cli:<user>`, through the command line). The kind
    is stored apart, so no token subject can pass for an operator."""

    kind: Literal["token", "operator"]
    subject: str
    tenant_id: str | None = None
    key_id: str | None = None

    @classmethod
    def of_token(cls, principal: Principal) -> Actor:
        return cls("token", principal.subject, principal.tenant_id, principal.key_id)

    @classmethod
    def operator(cls) -> Actor:
        """The local user running the command line."""
        return cls("operator", f"cli:{getpass.getuser()}")


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
        actor_kind=actor.kind,
        actor_subject=actor.subject,
        actor_tenant_id=actor.tenant_id,
        actor_key_id=actor.key_id,
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
