"""Request and response models of the sync and receipt routes (docs/SYNC.md); the command
line shapes its replies with them too, without the routes' FastAPI machinery."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, Tag

from app.api.documents_models import DocumentIn, ExternalId, StrictBody, Version, to_input
from app.errors import Unprocessable
from app.ingest.entries import Reference
from app.inputs.sync import MAX_ENTRIES, SyncInput
from app.operations import sync as operations


class SyncedDocumentIn(DocumentIn):
    """A full document: the batch's fields, `external_id` required."""

    external_id: ExternalId


class ReferenceIn(StrictBody):
    """A document the service should hold already: unchanged when its stored `version` is
    this one, else listed under `missing` (send it in full)."""

    external_id: ExternalId
    version: Version


def _entry_kind(value: Any) -> str:
    return "document" if isinstance(value, dict) and "content" in value else "reference"


Entry = Annotated[
    Annotated[SyncedDocumentIn, Tag("document")] | Annotated[ReferenceIn, Tag("reference")],
    Discriminator(_entry_kind),
]


class SyncIn(StrictBody):
    documents: Annotated[
        list[Entry],
        Field(
            max_length=MAX_ENTRIES,
            description="The collection's complete content as the source sees it: full "
            "documents (with `content`) and references (`external_id` and `version`). Every "
            "document of the collection you may see that is not named here is deleted.",
        ),
    ]
    dry_run: bool = Field(False, description="Compute the same lists; change nothing.")
    allow_empty: bool = Field(
        False, description="An empty `documents` deletes the whole collection: say so here."
    )
    max_deletions: int | float | None = Field(
        None,
        description="Refuse (409, nothing changed) when more would be deleted: a count, or a "
        "fraction (0 < f < 1) of the documents you may see in the collection.",
    )
    background: bool = Field(
        False,
        description="Run it as a background job (202 with the job's id): for a sync whose "
        "full documents are more than one request may embed. Poll GET /api/rag/jobs/{id}; "
        "its `sync` says the outcome and the receipt once it has ended.",
    )
    callback_url: str | None = Field(
        None,
        description="With `background`: called (a signed POST) when the job ends, as a "
        "job's callback is (docs/JOBS.md).",
    )


class SyncAccepted(BaseModel):
    job_id: uuid.UUID
    status: str = Field(description="`queued`.")
    documents: int = Field(description="Full documents the job ingests.")
    references: int
    bytes: int
    location: str = Field(description="The job's status URL (also the `Location` header).")


class SyncFailure(BaseModel):
    external_id: str
    status: int
    detail: str


class SyncCounts(BaseModel):
    added: int
    updated: int
    unchanged: int
    deleted: int
    missing: int
    failed: int


class ReceiptRef(BaseModel):
    receipt_id: uuid.UUID
    url: str


class SyncOut(BaseModel):
    collection: str
    dry_run: bool
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    deleted: list[str]
    missing: list[str] = Field(description="References to send in full.")
    failed: list[SyncFailure]
    counts: SyncCounts
    receipt: ReceiptRef | None = Field(description="None for a dry run.")

    @classmethod
    def of(cls, collection: str, done: operations.Synced) -> SyncOut:
        receipt = None
        if done.receipt is not None:
            receipt = ReceiptRef(receipt_id=done.receipt.id, url=receipt_url(done.receipt.id))
        return cls(
            collection=collection,
            dry_run=done.dry_run,
            added=done.added,
            updated=done.updated,
            unchanged=done.unchanged,
            deleted=done.deleted,
            missing=done.missing,
            failed=[
                SyncFailure(external_id=e, status=error.status, detail=error.detail)
                for e, error in done.failed
            ],
            counts=SyncCounts(
                added=len(done.added),
                updated=len(done.updated),
                unchanged=len(done.unchanged),
                deleted=len(done.deleted),
                missing=len(done.missing),
                failed=len(done.failed),
            ),
            receipt=receipt,
        )


def to_sync_input(collection: str, body: SyncIn) -> SyncInput:
    entries: list[Any] = []
    for index, entry in enumerate(body.documents):
        if isinstance(entry, ReferenceIn):
            entries.append(Reference(entry.external_id, entry.version))
            continue
        if "collection" in entry.model_fields_set and entry.collection != collection:
            raise Unprocessable(
                f"documents[{index}]: collection {entry.collection!r} is not the synced "
                f"collection {collection!r}"
            )
        entries.append(to_input(entry.model_copy(update={"collection": collection})))
    return SyncInput(
        collection,
        entries,
        dry_run=body.dry_run,
        allow_empty=body.allow_empty,
        max_deletions=body.max_deletions,
    )


def receipt_url(receipt_id: uuid.UUID) -> str:
    return f"/api/rag/receipts/{receipt_id}"


class ReceiptItem(BaseModel):
    receipt_id: uuid.UUID
    kind: Literal["sync", "delete", "tenant_delete"]
    collection: str | None
    created_at: datetime
    added: int
    updated: int
    deleted: int
    signed: bool = Field(description="Signed with the webhook secret (verify the receipt's GET).")
    url: str


class ReceiptList(BaseModel):
    items: list[ReceiptItem]
    total: int
    limit: int
    offset: int
