"""Documents: ingest (JSON, batch, file upload), list, read, delete."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, File, Form, Query, Request, Response, UploadFile, status

from app.api import examples
from app.api.deps import Caller, IngestCaller, ResourcesDep, SearchCaller
from app.api.disconnects import while_connected
from app.api.documents_models import (
    BatchIn,
    BatchItem,
    BatchOut,
    DocumentCollection,
    DocumentIn,
    DocumentList,
    DocumentOut,
    DocumentPatch,
    ExternalId,
    IngestOut,
    Title,
    Url,
    Version,
    access_form,
    metadata_form,
    to_change,
    to_input,
)
from app.api.openapi import GATED, WITH_BODY, errors
from app.errors import AppError
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.store import DEFAULT_COLLECTION
from app.inputs.files import file_input, read_capped
from app.operations import documents as operations
from app.operations import ingest as ingesting
from app.operations import sync as sync_operations
from app.resources import Resources
from app.storable import MAX_OFFSET

router = APIRouter(prefix="/api/rag/documents", tags=["documents"], responses=GATED)


async def _ingest(
    request: Request, resources: Resources, caller: Caller, document: DocumentInput
) -> IngestOut:
    """Ingest one document, stopped if the client leaves first (app/api/disconnects.py)."""
    sessions = caller.sessions(resources)
    result = await while_connected(
        request, lambda: ingesting.ingest(resources, sessions, caller.tenant_id, document)
    )
    return IngestOut.from_result(result)


@router.post(
    "",
    status_code=201,
    summary="Ingest one document (JSON)",
    responses={200: {"model": IngestOut, "description": "Unchanged"}, **WITH_BODY, **errors(415)},
)
async def create_document(
    body: Annotated[DocumentIn, Body(openapi_examples=examples.DOCUMENT)],
    caller: IngestCaller,
    resources: ResourcesDep,
    request: Request,
    response: Response,
) -> IngestOut:
    """Ingest one document; the same `external_id` again updates it (200 if unchanged)."""
    out = await _ingest(request, resources, caller, to_input(body))
    response.status_code = status.HTTP_201_CREATED if out.changed else status.HTTP_200_OK
    return out


@router.post("/batch", summary="Ingest several documents", responses=WITH_BODY)
async def create_documents(
    body: Annotated[BatchIn, Body(openapi_examples=examples.BATCH)],
    caller: IngestCaller,
    resources: ResourcesDep,
    request: Request,
) -> BatchOut:
    """Ingest several documents through the ingestion pipeline (slices parsed, embedded and
    written at the same time); each document is still all-or-nothing, and failures are
    reported per item."""
    documents = [to_input(document) for document in body.documents]
    outcomes = await while_connected(
        request,
        lambda: ingesting.ingest_batch(
            resources, caller.sessions(resources), caller.tenant_id, documents
        ),
    )
    items: list[BatchItem] = []
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, AppError):
            items.append(BatchItem(index=index, status=outcome.status, error=outcome.detail))
        else:
            out = IngestOut.from_result(outcome)
            items.append(BatchItem(index=index, status=201 if out.changed else 200, result=out))
    return BatchOut.of(items)


@router.post(
    "/upload",
    status_code=201,
    summary="Ingest a file (PDF, Word, PowerPoint, Excel, EPUB, ODT, markdown, HTML, text)",
    responses={200: {"model": IngestOut, "description": "Unchanged"}, **WITH_BODY, **errors(415)},
)
async def upload_document(
    caller: IngestCaller,
    resources: ResourcesDep,
    request: Request,
    response: Response,
    file: Annotated[
        UploadFile,
        File(
            description="PDF, Word (.docx), PowerPoint (.pptx), Excel (.xlsx), EPUB, "
            "OpenDocument text (.odt), markdown, HTML or text."
        ),
    ],
    title: Annotated[Title | None, Form()] = None,
    external_id: Annotated[ExternalId | None, Form()] = None,
    collection: Annotated[DocumentCollection, Form()] = DEFAULT_COLLECTION,
    source_url: Annotated[Url | None, Form()] = None,
    version: Annotated[Version | None, Form()] = None,
    metadata: Annotated[str | None, Form(description="A JSON object.")] = None,
    access: Annotated[
        str | None,
        Form(
            description="Who may see it: principals separated by commas, or a JSON array "
            "(user:<subject>, group:<name>); empty: every member of the tenant."
        ),
    ] = None,
) -> IngestOut:
    """Ingest a file; its type is sniffed from the content, not trusted from the name (a ZIP
    by its members). Citations keep the file's structure: PDF pages and slides are
    `page_number`s; headings (Word, ODT, EPUB chapters, markdown, HTML), a slide's title and a
    sheet's name with the rows a chunk holds are its `section`. Legacy .doc/.ppt/.xls files
    are 415: save them in the current format. A file that would cost too much to read is
    413/422 naming the limit (`limit` in the problem)."""
    data = await read_capped(file, resources.settings.upload_max_bytes)
    document = file_input(
        data,
        filename=file.filename,
        declared=file.content_type,
        title=title or None,
        external_id=external_id,
        collection=collection,
        source_url=source_url,
        metadata=metadata_form(metadata),
        access=access_form(access),
        version=version,
    )
    out = await _ingest(request, resources, caller, document)
    response.status_code = status.HTTP_201_CREATED if out.changed else status.HTTP_200_OK
    return out


@router.get("", summary="List the tenant's documents")
async def list_all(
    caller: SearchCaller,
    resources: ResourcesDep,
    collection: Annotated[DocumentCollection | None, Query()] = None,
    source_type: Annotated[SourceType | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> DocumentList:
    """Newest first (documents created together, in one batch, in the order of their
    external ids); `collection` and `source_type` narrow the list."""
    found, total = await operations.documents(
        caller.sessions(resources),
        caller.tenant_id,
        collection=collection,
        source_type=source_type.value if source_type else None,
        limit=limit,
        offset=offset,
    )
    return DocumentList(
        items=[DocumentOut.of(s) for s in found], total=total, limit=limit, offset=offset
    )


@router.get("/{document_id}", summary="Read a document", responses=errors(404))
async def read(
    document_id: uuid.UUID, caller: SearchCaller, resources: ResourcesDep
) -> DocumentOut:
    found = await operations.read_document(
        caller.sessions(resources), caller.tenant_id, document_id
    )
    return DocumentOut.of(found)


@router.patch(
    "/{document_id}",
    summary="Change a document's metadata or access list",
    responses={**WITH_BODY, **errors(404, 409)},
)
async def patch(
    document_id: uuid.UUID,
    body: Annotated[DocumentPatch, Body(openapi_examples=examples.DOCUMENT_PATCH)],
    caller: IngestCaller,
    resources: ResourcesDep,
) -> DocumentOut:
    """Change metadata and/or `access` without re-embedding; the chunks follow in the same
    transaction. A document the caller cannot see is not found, as an unknown one."""
    summary = await ingesting.update(
        caller.sessions(resources), caller.tenant_id, document_id, to_change(body)
    )
    return DocumentOut.of(summary)


@router.delete(
    "/{document_id}",
    status_code=204,
    summary="Delete a document",
    responses={
        204: {
            "description": "Deleted; `Receipt-Id` names its receipt",
            "headers": {"Receipt-Id": {"schema": {"type": "string", "format": "uuid"}}},
        },
        **errors(404),
    },
)
async def delete(
    document_id: uuid.UUID, caller: IngestCaller, resources: ResourcesDep, response: Response
) -> None:
    """Delete a document, its chunks, vectors and keyword postings; the `Receipt-Id` header
    names the signed receipt of the deletion (GET /api/rag/receipts/{id})."""
    receipt = await sync_operations.delete_document(
        resources.settings, caller.sessions(resources), caller.tenant_id, document_id
    )
    response.headers["Receipt-Id"] = str(receipt.id)
