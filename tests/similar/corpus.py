"""Planted near-duplicates and unrelated documents, and the HTTP calls the tests share."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update

from app.db.models import Document
from app.db.tenancy import SessionMaker, tenant_transaction
from tests.conftest import TenantClient

Json = dict[str, Any]

MANUAL = (
    "The travel policy covers every trip taken on company business. Employees book flights "
    "through the approved agency at least fourteen days ahead, choose economy class for "
    "flights under six hours, and may choose premium economy for longer flights. Hotel stays "
    "are reimbursed up to the city rate published by finance each January. Receipts must be "
    "uploaded within thirty days of returning, or the claim lapses.\n\n"
    "Meals on the road are covered by a daily allowance rather than by receipts. The "
    "allowance depends on the country and is paid with the next salary. Alcohol is never "
    "reimbursed. When a client pays for a meal, the allowance for that meal is not claimed.\n\n"
    "Rental cars need a manager's approval and are booked in the smallest category that fits "
    "the team and its luggage. Fuel is reimbursed against receipts; fines and tolls caused by "
    "the driver are not. Private use of a rental car on a business trip must be declared and "
    "is deducted from the claim.\n\n"
    "Trips that combine business with a holiday are allowed when the business part justifies "
    "the journey. The employee pays every extra night, any change of route for the holiday, "
    "and the travel of family members. Insurance covers the business days only.\n\n"
    "Questions about this policy go to the travel desk, which answers within two working days. "
    "Exceptions need written approval from a director before the trip is booked, never after."
)
ONE_WORD = MANUAL.replace("fourteen days ahead", "fifteen days ahead")
FOOTER = MANUAL + "\n\nExported from the intranet wiki on 3 March. Internal use only."
RECHUNKED = "Travel policy, version for the handbook.\n\n" + MANUAL.replace("\n\n", "\n")

RECIPE = (
    "To bake sourdough bread, feed the starter the evening before so that it doubles by "
    "morning. Mix flour and water and let the dough rest for an hour before adding the "
    "starter and salt. Fold the dough every thirty minutes for two hours, shape it into a "
    "tight ball, and let it proof overnight in the fridge. Bake in a preheated cast iron pot, "
    "covered for twenty minutes and uncovered for twenty five, until the crust is deep brown."
)
ASTRONOMY = (
    "Jupiter is the largest planet of the solar system, a gas giant with a mass more than "
    "twice that of all the other planets combined. Its Great Red Spot is a storm larger than "
    "the Earth that has raged for centuries. Galileo discovered its four largest moons in "
    "1610: Io, Europa, Ganymede and Callisto. Europa hides an ocean of liquid water under its "
    "icy crust, which makes it a candidate in the search for life beyond the Earth."
)
# Same topic as the manual, different text: related, never a near-duplicate.
RELATED = (
    "Our expense rules for conferences: the registration fee is paid by the department, "
    "speakers may claim an extra night, and posters are printed by the design team. Submit "
    "the conference programme with the request so that the budget owner can approve it."
)

PLANTED = {"manual": MANUAL, "one-word": ONE_WORD, "footer": FOOTER, "rechunked": RECHUNKED}
OTHERS = {"recipe": RECIPE, "astronomy": ASTRONOMY, "related": RELATED}


async def ingest_all(
    tenant: TenantClient, texts: dict[str, str], **extra: object
) -> dict[str, str]:
    """Ingest each text under its key as external id; key -> document id."""
    ids = {}
    for key, text in texts.items():
        body = {"external_id": key, "title": f"Doc {key}", "content": text, **extra}
        response = await tenant.http.post("/api/rag/documents", json=body, headers=tenant.headers)
        assert response.status_code in (200, 201), response.text
        ids[key] = response.json()["document_id"]
    return ids


async def similar(
    tenant: TenantClient, kind: str, item_id: str, **params: str | int | float | bool
) -> Json:
    response = await tenant.http.get(
        f"/api/rag/{kind}/{item_id}/similar", params=params, headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    reply: Json = response.json()
    return reply


async def dedupe(tenant: TenantClient, **body: object) -> Json:
    response = await tenant.http.post("/api/rag/dedupe", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    reply: Json = response.json()
    return reply


async def document_ids(tenant: TenantClient) -> set[str]:
    response = await tenant.http.get(
        "/api/rag/documents", params={"limit": 100}, headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    return {item["document_id"] for item in response.json()["items"]}


async def chunk_ids(tenant: TenantClient, document_id: str) -> list[str]:
    found = await tenant.http.post(
        "/api/rag/search",
        json={
            "query": "travel policy",
            "threshold": 0.1,
            "max_results": 20,
            "filters": {"document_ids": [document_id]},
        },
        headers=tenant.headers,
    )
    assert found.status_code == 200, found.text
    return [c["chunk_id"] for c in sorted(found.json()["chunks"], key=lambda c: c["chunk_index"])]


async def set_times(
    sessions: SessionMaker, tenant_id: str, ids: dict[str, str], order: list[str]
) -> None:
    """Created (and updated) a day apart, in `order`: the oldest first."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    async with tenant_transaction(sessions, tenant_id) as session:
        for day, key in enumerate(order):
            when = start + timedelta(days=day)
            await session.execute(
                update(Document)
                .where(Document.id == uuid.UUID(ids[key]))
                .values(created_at=when, updated_at=when)
            )
