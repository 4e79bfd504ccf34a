"""Collection sync and receipts: POST /api/rag/collections/{collection}/sync and
GET /api/rag/receipts/{receipt_id} (docs/SYNC.md)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Response
from fastapi.responses import JSONResponse

from app.api import examples
from app.api.deps import IngestCaller, ResourcesDep
from app.api.documents_models import DocumentCollection
from app.api.openapi import GATED, WITH_BODY, errors
from app.api.sync_models import (
    ReceiptItem,
    ReceiptList,
    SyncAccepted,
    SyncIn,
    SyncOut,
    receipt_url,
    to_sync_input,
)
from app.errors import Unprocessable
from app.jobs.callbacks import CallbackPolicy, check_callback_url
from app.operations import sync as operations
from app.permissions import USER_PREFIX
from app.storable import MAX_OFFSET

router = APIRouter(tags=["documents"], responses=GATED)


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
