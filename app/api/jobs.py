"""Ingestion jobs: submit files or JSON documents (202), poll, list, cancel."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import FormData, UploadFile

from app.api import examples
from app.api.deps import IngestCaller, ResourcesDep, SearchCaller
from app.api.documents_models import (
    METADATA,
    DocumentCollection,
    ExternalId,
    Title,
    Url,
    Version,
    access_form,
    metadata_form,
)
from app.api.jobs_models import JobAccepted, JobDocumentsIn, JobList, JobOut, JobStatus
from app.api.openapi import GATED, WITH_BODY, errors
from app.errors import BadRequest, PayloadTooLarge, Unprocessable, UnsupportedMediaType
from app.ingest.parsing import sniff_source_type
from app.ingest.store import DEFAULT_COLLECTION
from app.inputs.files import read_capped
from app.jobs import JobInput
from app.jobs.callbacks import CallbackPolicy, check_callback_url
from app.json_input import parse_json
from app.operations import jobs as operations
from app.permissions import USER_PREFIX
from app.settings import Settings

router = APIRouter(prefix="/api/rag/jobs", tags=["jobs"], responses=GATED)
PATH = "/api/rag/jobs"
_FORM_FIELDS = {
    *("files", "file", "title", "external_id", "collection", "source_url", "metadata", "access"),
    *("version", "callback_url"),
}
_SUBMIT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "PDF, Word (.docx), PowerPoint (.pptx), Excel "
                            "(.xlsx), EPUB, OpenDocument text (.odt), markdown, HTML or text; "
                            "each sniffed by its content, a refused one fails alone.",
                        },
                        "collection": {"type": "string"},
                        "source_url": {"type": "string"},
                        "metadata": {"type": "string", "description": "A JSON object."},
                        "title": {"type": "string", "description": "With one file only."},
                        "external_id": {"type": "string", "description": "With one file only."},
                        "version": {"type": "string", "description": "With one file only."},
                        "callback_url": {
                            "type": "string",
                            "description": "Called (a signed POST) when the job ends.",
                        },
                    },
                    "required": ["files"],
                }
            },
            "application/json": {
                "schema": JobDocumentsIn.model_json_schema(),
                "examples": {
                    "markdown": {
                        "summary": "One markdown document in the background",
                        "value": examples.JOB_DOCUMENTS,
                    }
                },
            },
        },
    }
}


@router.post(
    "",
    status_code=202,
    openapi_extra=_SUBMIT_BODY,
    summary="Submit files or documents for background ingestion",
    responses={**WITH_BODY, **errors(415)},
)
async def submit(
    request: Request, caller: IngestCaller, resources: ResourcesDep, response: Response
) -> JobAccepted:
    """Ingest files (multipart `files`, several) or JSON `documents` in the background; poll
    the `Location` for progress, or give a `callback_url` to be called (a signed POST) when
    the job ends. Each document is all-or-nothing; a bad one fails alone."""
    inputs, callback_url = await _inputs(request, resources.settings)
    if callback_url is not None:
        policy = CallbackPolicy.of(resources.settings)
        callback_url = await check_callback_url(callback_url, policy)
    job_id = await operations.submit(
        resources.settings,
        caller.sessions(resources),
        caller.tenant_id,
        inputs,
        submitter=USER_PREFIX + caller.principal.subject,
        callback_url=callback_url,
    )
    response.headers["Location"] = f"{PATH}/{job_id}"
    size = sum(len(item.content) for item in inputs)
    return JobAccepted(job_id=job_id, status="queued", documents=len(inputs), bytes=size)


@router.get("", summary="List the tenant's ingestion jobs")
async def list_all(
    caller: SearchCaller,
    resources: ResourcesDep,
    status_: Annotated[JobStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> JobList:
    """The tenant's jobs, newest first."""
    jobs, total = await operations.jobs(
        caller.sessions(resources), caller.tenant_id, status=status_, limit=limit, offset=offset
    )
    return JobList(items=[JobOut.of(job) for job in jobs], total=total, limit=limit, offset=offset)


@router.get("/{job_id}", summary="A job's status and progress", responses=errors(404))
async def read(job_id: uuid.UUID, caller: SearchCaller, resources: ResourcesDep) -> JobOut:
    """Status, progress, per-document results and timings; 404 for another tenant's job."""
    return JobOut.of(await operations.job(caller.sessions(resources), caller.tenant_id, job_id))


@router.delete(
    "/{job_id}",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Cancel a job",
    responses=errors(404),
)
async def cancel(job_id: uuid.UUID, caller: IngestCaller, resources: ResourcesDep) -> JobOut:
    """Cancel: a queued job never runs; a running one stops after the document in progress."""
    cancelled = await operations.cancel(caller.sessions(resources), caller.tenant_id, job_id)
    return JobOut.of(cancelled)


async def _inputs(request: Request, settings: Settings) -> tuple[list[JobInput], str | None]:
    """The job's documents, and its callback URL."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        inputs, callback_url = await _json_inputs(request)
    elif kind == "multipart/form-data":
        inputs, callback_url = await _file_inputs(request, settings)
    else:
        raise UnsupportedMediaType("send multipart/form-data (files) or application/json")
    if len(inputs) > settings.job_max_documents:
        raise PayloadTooLarge(
            f"a job holds at most {settings.job_max_documents} documents (RAG_JOB_MAX_DOCUMENTS)"
        )
    return inputs, callback_url


async def _json_inputs(request: Request) -> tuple[list[JobInput], str | None]:
    try:
        # parsed like FastAPI's own bodies: a lone surrogate escape then reaches the field's own
        # rule (a 422 naming it) instead of failing the whole parse
        data = parse_json(await request.body())
    except ValueError:
        raise BadRequest("the body is not valid JSON") from None
    try:
        body = JobDocumentsIn.model_validate(data)
    except ValidationError as error:
        raise Unprocessable(
            "the body is not a valid list of documents",
            extra={"errors": [_field_error(e) for e in error.errors()[:20]]},
        ) from None
    inputs = []
    for index, doc in enumerate(body.documents):
        if doc.chunks is not None:
            raise Unprocessable(
                f"documents[{index}]: precomputed chunks go to POST /api/rag/documents/batch"
            )
        fields = {
            "title": doc.title or None,
            "external_id": doc.external_id,
            "collection": doc.collection,
            "source_url": doc.source_url,
            "metadata": dict(doc.metadata),
            "access": list(doc.access),
            "version": doc.version,
        }
        inputs.append(
            JobInput(doc.content.encode(), True, doc.source_type.value, doc.title, fields)
        )
    return inputs, body.callback_url


def _field_error(error: Any) -> dict[str, str]:
    return {"field": ".".join(str(part) for part in error["loc"]), "message": error["msg"]}


async def _file_inputs(request: Request, settings: Settings) -> tuple[list[JobInput], str | None]:
    form = await request.form(max_files=settings.job_max_documents, max_fields=50)
    try:
        return await _form_inputs(form, settings), _text_field(form, "callback_url")
    finally:
        await form.close()


async def _form_inputs(form: FormData, settings: Settings) -> list[JobInput]:
    unknown = set(form.keys()) - _FORM_FIELDS
    if unknown:
        raise Unprocessable(f"unknown form fields: {', '.join(sorted(unknown))}")
    files = [f for f in form.getlist("files") + form.getlist("file") if isinstance(f, UploadFile)]
    if not files:
        raise Unprocessable("no files: send them in the multipart field `files`")
    single = {name: _text_field(form, name) for name in ("title", "external_id", "version")}
    if len(files) > 1 and any(single.values()):
        raise Unprocessable("title, external_id and version apply to a job of one file only")
    fields = {
        "title": _valid(Title, single["title"], "title") or None,
        "external_id": _valid(ExternalId, single["external_id"], "external_id"),
        "collection": _valid(DocumentCollection, _text_field(form, "collection"), "collection")
        or DEFAULT_COLLECTION,
        "source_url": _valid(Url, _text_field(form, "source_url"), "source_url"),
        "metadata": METADATA.dump_python(metadata_form(_text_field(form, "metadata"))),
        "access": list(access_form(_text_field(form, "access"))),
        "version": _valid(Version, single["version"], "version"),
    }
    inputs = []
    for upload in files:
        try:
            data = b""
            data = await read_capped(
                upload, settings.job_max_request_bytes, "RAG_JOB_MAX_REQUEST_BYTES"
            )
            source_type = sniff_source_type(
                data, filename=upload.filename, declared=upload.content_type
            ).value
            # a file is known by its name as sent (a folder's relative path, from `rag ingest
            # --background` or the client): submitting the folder again updates it in place
            named = _valid(ExternalId, upload.filename, "files") if upload.filename else None
            own = {**fields, "external_id": fields["external_id"] or named}
        except (Unprocessable, UnsupportedMediaType, PayloadTooLarge) as error:
            if isinstance(error, PayloadTooLarge) and not data:
                raise  # the request's own limit; a ZIP's too many members fails the file alone
            # recorded as this document's failure, the others still run
            source_type = "text"
            own = {**fields, "refused": {"status": error.status, "detail": error.detail}}
        inputs.append(JobInput(data, False, source_type, upload.filename, own))
    return inputs


def _text_field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if value is not None and not isinstance(value, str):
        raise Unprocessable(f"form field {name} must be text")
    return value or None


def _valid(kind: Any, value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as error:
        raise Unprocessable(f"{name}: {error.errors()[0]['msg']}") from None
