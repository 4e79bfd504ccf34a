"""Collection sync and receipts: POST /api/rag/collections/{collection}/sync and
GET /api/rag/receipts/{receipt_id} (docs/SYNC.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Discriminator, Field, Tag

from app.api import examples
from app.api.deps import IngestCaller, ResourcesDep
from app.api.documents_models import (
    DocumentCollection,
    DocumentIn,
    ExternalId,
    StrictBody,
    Version,
    to_input,
)
from app.api.openapi import GATED, WITH_BODY, errors
from app.errors import Unprocessable
from app.ingest.entries import Reference
from app.inputs.sync import MAX_ENTRIES, SyncInput
from app.jobs.callbacks import CallbackPolicy, check_callback_url
from app.operations import sync as operations
from app.permissions import USER_PREFIX
from app.storable import MAX_OFFSET

router = APIRouter(tags=["documents"], responses=GATED)


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


@router.post(
    "/api/rag/collections/{collection}/sync",
    summary="Sync a collection: add, update and delete to match the source",
    response_model=SyncOut,
    responses={
        202: {"model": SyncAccepted, "description": "Accepted as a background job"},
        **WITH_BODY,
        **errors(404, 409),
    },
)
async def sync_collection(
    collection: Annotated[DocumentCollection, Path()],
    body: Annotated[SyncIn, Body(openapi_examples=examples.SYNC)],
    caller: IngestCaller,
    resources: ResourcesDep,
) -> SyncOut | JSONResponse:
    """The collection's complete content as your source sees it: full documents are
    upserted (unchanged content embeds nothing), a reference whose stored `version` equals is
    unchanged, one the service lacks or holds at another version is listed under `missing`
    and left as it is, and every document of the collection you may see that is not named is
    deleted. Two syncs of one collection run one after the other. The reply names what
    changed and the signed receipt (GET /api/rag/receipts/{id}). With `background`, the
    sync runs as a job (202): for more full documents than one request may embed."""
    asked = to_sync_input(collection, body)
    sessions = caller.sessions(resources)
    if body.background:
        callback_url = body.callback_url
        if callback_url is not None:
            policy = CallbackPolicy.of(resources.settings)
            callback_url = await check_callback_url(callback_url, policy)
        job = await operations.submit(
            resources,
            sessions,
            caller.tenant_id,
            asked,
            submitter=USER_PREFIX + caller.principal.subject,
            callback_url=callback_url,
        )
        location = f"/api/rag/jobs/{job.job_id}"
        accepted = SyncAccepted(
            job_id=job.job_id,
            status="queued",
            documents=job.documents,
            references=job.references,
            bytes=job.bytes,
            location=location,
        )
        return JSONResponse(
            accepted.model_dump(mode="json"), status_code=202, headers={"Location": location}
        )
    if body.callback_url is not None:
        raise Unprocessable("callback_url: only a sync run in the background calls back")
    done = await operations.sync(resources, sessions, caller.tenant_id, asked)
    return SyncOut.of(collection, done)


RECEIPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The receipt as signed: receipt_id, tenant_id, kind (sync, delete, "
    "tenant_delete), collection, created_at, added, updated, deleted (with content hashes), "
    "erased (chunks, vectors and keyword postings removed; `gone`: none is left).",
}


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


@router.get("/api/rag/receipts", summary="List the tenant's receipts, newest first")
async def receipts(
    caller: IngestCaller,
    resources: ResourcesDep,
    collection: Annotated[DocumentCollection | None, Query()] = None,
    kind: Annotated[Literal["sync", "delete"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> ReceiptList:
    """What each sync and document deletion changed, as counts; read one whole (and its
    signature) at its `url`."""
    found, total = await operations.receipts(
        caller.sessions(resources),
        caller.tenant_id,
        collection=collection,
        kind=kind,
        limit=limit,
        offset=offset,
    )
    items = [
        ReceiptItem(
            receipt_id=r.id,
            kind=r.kind,
            collection=r.collection,
            created_at=r.created_at,
            added=r.added,
            updated=r.updated,
            deleted=r.deleted,
            signed=r.signed,
            url=receipt_url(r.id),
        )
        for r in found
    ]
    return ReceiptList(items=items, total=total, limit=limit, offset=offset)


@router.get(
    "/api/rag/receipts/{receipt_id}",
    summary="Read a receipt, with its signature",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {"schema": RECEIPT_SCHEMA}}},
        **errors(404),
    },
)
async def receipt(receipt_id: uuid.UUID, caller: IngestCaller, resources: ResourcesDep) -> Response:
    """The receipt's JSON exactly as signed, with the Standard Webhooks headers
    (`webhook-id`, `webhook-timestamp`, `webhook-signature`) to verify it with the webhook
    secret; without a secret configured the receipt is unsigned and they are absent."""
    signed = await operations.receipt(caller.sessions(resources), caller.tenant_id, receipt_id)
    return Response(signed.payload, media_type="application/json", headers=signed.headers())
