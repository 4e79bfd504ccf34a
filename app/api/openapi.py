"""The published OpenAPI document: tags, the bearer scheme, and the real error replies.

Every error the service sends is an RFC 9457 problem (`application/problem+json`, rendered by
app/api/problems.py); `errors(...)` documents those replies on a router or a route, with the
`Problem` schema (and `ValidationProblem` for 422, `Retry-After` for 429 and 503), and keeps
FastAPI from documenting its own `{detail: [...]}` shape, which the service never sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

from app.api.problems import PROBLEM_JSON

BEARER_SCHEME = "bearerAuth"
BEARER_DESCRIPTION = (
    'A JWT from `rag token --tenant ID --scopes "rag:search rag:ingest"` (or your identity '
    "provider), pasted without the word Bearer. Scopes: `rag:search` (search, context, reading "
    "documents), `rag:ingest` (adding and deleting documents), `rag:admin` (`/api/admin`, and "
    "acting for another tenant with `X-Tenant-ID`)."
)
DESCRIPTION = """Multi-tenant retrieval for RAG: ingest documents, search them, cite them.

**Authorize** with a bearer token (a JWT). On the machine that runs the service:

    rag tenant create acme
    rag token --tenant acme --scopes "rag:search rag:ingest"

Every error is an [RFC 9457](https://www.rfc-editor.org/rfc/rfc9457) problem
(`application/problem+json`: `type`, `title`, `status`, `detail`, and `errors` for invalid
fields). Every reply to an authenticated request carries the tenant's remaining rate-limit
budget (`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`); a 429 says when to retry
in `Retry-After`."""

TAGS: list[dict[str, Any]] = [
    {
        "name": "search",
        "description": "Vector, keyword and hybrid search over the tenant's chunks (rag:search).",
    },
    {
        "name": "context",
        "description": "A cited context block for an LLM prompt, within a token budget "
        "(rag:search).",
    },
    {
        "name": "documents",
        "description": "Ingest (JSON, batch, file upload), list, read and delete documents. "
        "Reading needs rag:search, writing rag:ingest.",
    },
    {
        "name": "admin",
        "description": "Tenants, their statistics and the audit log of admin actions "
        "(rag:admin, for any tenant).",
    },
    {
        "name": "similar",
        "description": "More like this (a chunk or a document) and near-duplicate detection "
        "with dry run and merge (rag:search; a merge needs rag:ingest).",
    },
    {
        "name": "jobs",
        "description": "Background ingestion of large files and folders with progress "
        "(submitting and cancelling need rag:ingest, reading rag:search).",
    },
    {
        "name": "identity",
        "description": "Who a token is: tenant, subject, scopes, expiry (any valid token).",
    },
    {"name": "health", "description": "Liveness, readiness and Prometheus metrics (no token)."},
]


class FieldError(BaseModel):
    field: str = Field(description="The invalid field, dotted (`filters.metadata.year`).")
    message: str
    location: list[str] | None = Field(
        default=None, description="Where it was: `body`, `query`, `path` or `header`, then keys."
    )


class Problem(BaseModel):
    """An RFC 9457 problem."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "type": "https://rag-service.dev/problems/not-found",
                    "title": "Not found",
                    "status": 404,
                    "detail": "document 0b5e… does not exist",
                }
            ]
        },
    )
    type: str = Field(description="A URI naming the kind of problem.")
    title: str
    status: int
    detail: str


class ValidationProblem(Problem):
    """A 422 problem; `errors` names each invalid field."""

    errors: list[FieldError] | None = None


_MEANING = {
    400: "The request could not be parsed: a body that is not UTF-8, a broken multipart "
    "form, or a malformed request line or header.",
    401: "No bearer token, or one that is expired, malformed or signed with another key.",
    403: "The token lacks the scope, its tenant is unknown or suspended, or X-Tenant-ID names "
    "another tenant without rag:admin.",
    404: "No such resource for this tenant.",
    408: "The request head or body did not arrive in time (RAG_HTTP_HEAD_TIMEOUT_SECONDS, "
    "RAG_HTTP_BODY_TIMEOUT_SECONDS; any route); the connection is closed.",
    409: "The request conflicts with the resource's state.",
    413: "The body (or a batch) is larger than the configured limit.",
    415: "The content is of a type the service does not ingest.",
    422: "A field is missing or invalid; `errors` lists them.",
    429: "The tenant's rate limit is spent; retry after `Retry-After` seconds.",
    431: "The request line and headers are larger than RAG_HTTP_MAX_HEADER_BYTES (any route); "
    "the connection is closed.",
    503: "The database (or the rate limiter, when configured to fail closed) is unreachable; "
    "retry after `Retry-After` seconds.",
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 0},
    }
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for these error statuses, as the service really sends them."""
    documented: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        schema = _ref(ValidationProblem if status == 422 else Problem)
        entry: dict[str, Any] = {
            "description": _MEANING[status],
            "content": {PROBLEM_JSON: {"schema": schema}},
        }
        if status in (429, 503):
            entry["headers"] = _RETRY_AFTER
        documented[status] = entry
    return documented


GATED = errors(400, 401, 403, 422, 429, 503)  # 400: e.g. a URL past the server's line limit
WITH_BODY = errors(400, 413)  # any request body: unparsable, or over RAG_UPLOAD_MAX_BYTES


def install_openapi(app: FastAPI) -> None:
    """Build the document once, with the problem schemas the `errors` entries refer to."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=app.routes,
                tags=app.openapi_tags,
            )
            _add_problem_schemas(document)
            _add_connection_limits(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _add_problem_schemas(document: dict[str, Any]) -> None:
    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    for model in (FieldError, Problem, ValidationProblem):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        defs: Mapping[str, Any] = schema.pop("$defs", {})
        schemas.update(defs)
        schemas[model.__name__] = schema


def _add_connection_limits(document: dict[str, Any]) -> None:
    """Every operation can meet the server's limits on a request's head and the time it takes
    to arrive (http_protocol.py)."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            operation.setdefault("responses", {}).update(
                {str(status): response for status, response in errors(408, 431).items()}
            )
