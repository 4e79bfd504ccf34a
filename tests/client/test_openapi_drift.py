"""The client's models against the service's OpenAPI document: they cannot drift apart."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from rag_client import admin_models as admin
from rag_client import catalog_models as catalog
from rag_client import job_models as jobs
from rag_client import models

from app.settings import Settings
from tests.client.schema_drift import Schema, drift, openapi, parameter_drift

RAG = "/api/rag"
BODIES: list[tuple[str, str, type[BaseModel]]] = [
    ("POST", f"{RAG}/search", models.SearchQuery),
    ("POST", f"{RAG}/context", models.ContextQuery),
    ("POST", f"{RAG}/documents", models.NewDocument),
    ("POST", "/api/admin/tenants", admin.NewTenant),
    ("PATCH", "/api/admin/tenants/{tenant_id}", admin.TenantChange),
]
REPLIES: list[tuple[str, str, type[BaseModel]]] = [
    ("POST", f"{RAG}/search", models.SearchResult),
    ("POST", f"{RAG}/context", models.ContextResult),
    ("POST", f"{RAG}/documents", models.IngestResult),
    ("POST", f"{RAG}/documents/upload", models.IngestResult),
    ("POST", f"{RAG}/documents/batch", models.BatchResult),
    ("GET", f"{RAG}/documents", models.DocumentPage),
    ("GET", f"{RAG}/documents/{{document_id}}", models.Document),
    ("POST", "/api/admin/tenants", admin.Tenant),
    ("PATCH", "/api/admin/tenants/{tenant_id}", admin.Tenant),
    ("GET", "/api/admin/tenants/{tenant_id}/stats", admin.TenantStats),
    ("GET", "/api/admin/tenants", admin.TenantPage),
    ("POST", f"{RAG}/jobs", jobs.JobAccepted),
    ("GET", f"{RAG}/jobs/{{job_id}}", jobs.Job),
    ("DELETE", f"{RAG}/jobs/{{job_id}}", jobs.Job),
    ("GET", f"{RAG}/jobs", jobs.JobPage),
    ("GET", f"{RAG}/me", catalog.Identity),
    ("GET", f"{RAG}/formats", catalog.FormatList),
    ("GET", f"{RAG}/collections", catalog.CollectionList),
    ("GET", f"{RAG}/documents/{{document_id}}/chunks", catalog.DocumentChunks),
    ("GET", "/api/admin/tiers", admin.TierList),
]


@pytest.fixture(scope="module")
def document(settings: Settings) -> Schema:
    return openapi(settings)


@pytest.mark.parametrize(
    ("method", "path", "model"), BODIES, ids=lambda v: getattr(v, "__name__", v)
)
def test_request_bodies_match(
    document: Schema, method: str, path: str, model: type[BaseModel]
) -> None:
    assert drift(document, method, path, model, reply=False) == []


@pytest.mark.parametrize(
    ("method", "path", "model"), REPLIES, ids=lambda v: getattr(v, "__name__", v)
)
def test_replies_match(document: Schema, method: str, path: str, model: type[BaseModel]) -> None:
    assert drift(document, method, path, model, reply=True) == []


def test_query_parameters_match(document: Schema) -> None:
    assert (
        parameter_drift(
            document, "GET", f"{RAG}/documents", {"collection", "source_type", "limit", "offset"}
        )
        == []
    )
    chunks = f"{RAG}/documents/{{document_id}}/chunks"
    assert parameter_drift(document, "GET", chunks, {"style", "limit", "offset"}) == []
    assert parameter_drift(document, "GET", "/api/admin/tenants", {"limit", "offset"}) == []


def test_a_drifted_model_is_caught(document: Schema) -> None:
    class Renamed(models.Reply):
        chunks: list[models.Chunk]
        total: int  # the service calls it total_found

    problems = drift(document, "POST", f"{RAG}/search", Renamed, reply=True)
    assert problems
    assert "total_found" in problems[0]

    class WrongType(models.Body):
        query: str
        max_results: str

    assert drift(document, "POST", f"{RAG}/search", WrongType, reply=False)
