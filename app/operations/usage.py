"""A tenant's own traffic (searches, ingests, refusals in the last hour, day and per hour):
what GET /api/rag/usage answers any member of the tenant, as the admin stats give it."""

from __future__ import annotations

from app.db.tenancy import tenant_transaction
from app.resources import Resources
from app.usage import HourTraffic, TrafficWindows, hourly_traffic, traffic


async def tenant_traffic(
    resources: Resources, tenant_id: str
) -> tuple[TrafficWindows, list[HourTraffic]]:
    """The counts so far (this process's pending ones written first), under the tenant's RLS."""
    await resources.usage.flush(resources.sessions)
    async with tenant_transaction(resources.sessions, tenant_id) as session:
        return await traffic(session, tenant_id), await hourly_traffic(session, tenant_id)
