"""Receipts: the signed record of what a collection sync or a deletion changed (docs/SYNC.md).

A receipt's `body` is a JSON object (id, tenant, kind, collection, time, what was added,
updated and deleted with content hashes and versions, and what the deletion removed: chunks,
vectors, keyword postings, with the check that none is left). It is signed as a Standard
Webhooks message would be (id = the receipt's id, timestamp = its time, payload = the body's
bytes as stored and served), with RAG_WEBHOOK_SECRET; without a secret it is kept unsigned.
A receipt is written in the transaction of the change it records, and never changed.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Receipt, Tenant
from app.db.tenancy import tenant_of
from app.errors import NotFound
from app.settings import Settings
from app.webhooks.signing import signature

KINDS = ("sync", "delete", "tenant_delete")


@dataclass(frozen=True, slots=True)
class SignedReceipt:
    id: uuid.UUID
    payload: bytes  # the body's JSON, as signed
    timestamp: int
    signature: str | None  # `v1,<base64>`; None without a webhook secret

    @property
    def body(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.payload)
        return parsed

    def headers(self) -> dict[str, str]:
        """The Standard Webhooks headers a verifier takes with `payload`."""
        if self.signature is None:
            return {}
        return {
            "webhook-id": str(self.id),
            "webhook-timestamp": str(self.timestamp),
            "webhook-signature": self.signature,
        }


def _payload(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


async def record(
    session: AsyncSession,
    settings: Settings,
    *,
    kind: str,
    collection: str | None,
    changes: dict[str, Any],
    tenant_id: str | None = None,
) -> SignedReceipt:
    """Write the receipt of `changes` in the session's transaction: its tenant's, or (a
    registry transaction scoped to it) `tenant_id`'s."""
    assert kind in KINDS
    receipt_id = uuid.uuid4()
    now = datetime.now(UTC).replace(microsecond=0)  # Standard Webhooks timestamps are seconds
    body = {
        "receipt_id": str(receipt_id),
        "tenant_id": tenant_id or tenant_of(session),
        "kind": kind,
        "collection": collection,
        "created_at": now.isoformat().replace("+00:00", "Z"),
        **changes,
    }
    signed = _sign(settings, receipt_id, int(now.timestamp()), _payload(body))
    session.add(
        Receipt(
            tenant_id=body["tenant_id"],
            id=receipt_id,
            kind=kind,
            collection=collection,
            # the database's clock, whole: the order of receipts within one second, and a
            # tenant id created again reads none written before (see _since_created)
            created_at=func.clock_timestamp(),
            body=body,
            signature=signed.signature,
        )
    )
    await session.flush()
    return signed


async def read(
    session: AsyncSession, receipt_id: uuid.UUID, *, of_any_owner: str | None = None
) -> SignedReceipt:
    """The tenant's receipt, as signed; 404 when it has none of that id. A tenant id created
    again after a deletion reads only its own receipts, not those of the tenant that held the
    id before (`of_any_owner`: that tenant id's, for the admin, who reads both)."""
    stmt = select(Receipt).where(Receipt.id == receipt_id)
    if of_any_owner is not None:
        stmt = stmt.where(Receipt.tenant_id == of_any_owner)  # a registry transaction: routed
    else:
        stmt = _since_created(stmt)
    receipt = await session.scalar(stmt)
    if receipt is None:
        raise NotFound(f"receipt {receipt_id} does not exist")
    signed_at = datetime.fromisoformat(receipt.body["created_at"].replace("Z", "+00:00"))
    return SignedReceipt(
        receipt.id, _payload(receipt.body), int(signed_at.timestamp()), receipt.signature
    )


@dataclass(frozen=True, slots=True)
class ReceiptSummary:
    id: uuid.UUID
    kind: str
    collection: str | None
    created_at: datetime
    added: int
    updated: int
    deleted: int
    signed: bool


def _since_created(stmt: Any) -> Any:
    """Only the receipts written since the tenant (of that id) was created: both times are
    the database's, the tenant's its creation's transaction's, a receipt's when written (after
    that transaction committed)."""
    since = select(Tenant.created_at).where(Tenant.id == Receipt.tenant_id)
    return stmt.where(Receipt.created_at > since.scalar_subquery())


async def list_receipts(
    session: AsyncSession, *, collection: str | None, kind: str | None, limit: int, offset: int
) -> tuple[list[ReceiptSummary], int]:
    """A page of the session tenant's receipts, newest first, with what each counted, and how
    many there are."""
    tenant_id = tenant_of(session)
    where = [Receipt.tenant_id == tenant_id]
    if collection is not None:
        where.append(Receipt.collection == collection)
    if kind is not None:
        where.append(Receipt.kind == kind)

    def count(key: str) -> Any:
        return func.coalesce(func.jsonb_array_length(Receipt.body[key]), 0)

    stmt = _since_created(
        select(
            Receipt.id,
            Receipt.kind,
            Receipt.collection,
            Receipt.created_at,
            count("added"),
            count("updated"),
            count("deleted"),
            Receipt.signature.is_not(None),
        ).where(*where)
    )
    rows = await session.execute(
        stmt.order_by(Receipt.created_at.desc(), Receipt.id).limit(limit).offset(offset)
    )
    total = await session.scalar(
        _since_created(select(func.count()).select_from(Receipt).where(*where))
    )
    return [ReceiptSummary(*row) for row in rows], int(total or 0)


def _sign(
    settings: Settings, receipt_id: uuid.UUID, timestamp: int, payload: bytes
) -> SignedReceipt:
    secret = settings.webhook_secret
    mark = None
    if secret is not None:
        mark = signature(
            secret.get_secret_value(),
            message_id=str(receipt_id),
            timestamp=timestamp,
            body=payload,
        )
    return SignedReceipt(receipt_id, payload, timestamp, mark)
