"""Typed client for the RAG retrieval service (httpx + pydantic only).

from rag_client import RagClient

with RagClient("http://127.0.0.1:8000", token) as rag:
    for chunk in rag.search("how do volcanoes erupt?").chunks:
        print(chunk.similarity, chunk.title)
"""

__version__ = "0.1.0"

from rag_client.admin_models import (
    AuditEntry,
    AuditPage,
    JobCounts,
    Tenant,
    TenantPage,
    TenantStats,
    Tier,
    TierList,
)
from rag_client.async_client import AsyncRagClient
from rag_client.catalog_models import (
    Collection,
    CollectionList,
    DocumentChunks,
    Identity,
    StoredChunk,
)
from rag_client.client import RagClient
from rag_client.errors import (
    BadRequest,
    Conflict,
    FieldError,
    Forbidden,
    Invalid,
    NotFound,
    PayloadTooLarge,
    ProblemError,
    RagError,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    Timeout,
    TransportError,
    Unauthorized,
    UnsupportedMediaType,
)
from rag_client.job_models import Job, JobAccepted, JobPage, JobStatus
from rag_client.models import (
    BatchItem,
    BatchResult,
    Chunk,
    Citation,
    CitationStyle,
    ContextMetrics,
    ContextResult,
    Document,
    DocumentPage,
    Filters,
    IngestResult,
    NewDocument,
    PrecomputedChunk,
    Range,
    SearchMode,
    SearchResult,
    Shortfall,
    SourceType,
)
from rag_client.retry import Retry
from rag_client.similar_models import (
    DedupeResult,
    DocumentRef,
    DuplicateGroup,
    MergeStrategy,
    SearchScope,
    SimilarChunk,
    SimilarResult,
)

__all__ = [
    "AsyncRagClient",
    "AuditEntry",
    "AuditPage",
    "BadRequest",
    "BatchItem",
    "BatchResult",
    "Chunk",
    "Citation",
    "CitationStyle",
    "Collection",
    "CollectionList",
    "Conflict",
    "ContextMetrics",
    "ContextResult",
    "DedupeResult",
    "Document",
    "DocumentChunks",
    "DocumentPage",
    "DocumentRef",
    "DuplicateGroup",
    "FieldError",
    "Filters",
    "Forbidden",
    "Identity",
    "IngestResult",
    "Invalid",
    "Job",
    "JobAccepted",
    "JobCounts",
    "JobPage",
    "JobStatus",
    "MergeStrategy",
    "NewDocument",
    "NotFound",
    "PayloadTooLarge",
    "PrecomputedChunk",
    "ProblemError",
    "RagClient",
    "RagError",
    "Range",
    "RateLimited",
    "Retry",
    "SearchMode",
    "SearchResult",
    "SearchScope",
    "ServerError",
    "ServiceUnavailable",
    "Shortfall",
    "SimilarChunk",
    "SimilarResult",
    "SourceType",
    "StoredChunk",
    "Tenant",
    "TenantPage",
    "TenantStats",
    "Tier",
    "TierList",
    "Timeout",
    "TransportError",
    "Unauthorized",
    "UnsupportedMediaType",
]
