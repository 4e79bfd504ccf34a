"""Typed replies of the admin API (scope `rag:admin`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import JsonValue

from rag_client.models import Body, Reply


class NewTenant(Body):
    id: str
    name: str | None = None
    tier: str | None = None


class TenantStatus(StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"


class TenantChange(Body):
    tier: str | None = None
    status: TenantStatus | None = None


class Tenant(Reply):
    id: str
    name: str
    tier: str
    status: str
    created_at: datetime
    updated_at: datetime
    documents: int | None = None
    chunks: int | None = None


class TenantPage(Reply):
    items: list[Tenant]
    limit: int
    offset: int
    total: int | None = None


class TenantStats(Reply):
    tenant_id: str
    documents: int
    chunks: int
    collections: int
    chunks_by_model: dict[str, int]
    storage: dict[str, JsonValue] | None = None
    traffic: dict[str, JsonValue] | None = None


class AuditEntry(Reply):
    """One admin action: who (`actor`), when, what, and the state before and after."""

    id: int | str
    action: str
    actor: str | None = None
    at: datetime | None = None
    tenant_id: str | None = None
    before: JsonValue = None
    after: JsonValue = None


class AuditPage(Reply):
    items: list[AuditEntry]
    limit: int
    offset: int
    total: int | None = None
