"""ORM models. Every tenant-owned table carries `tenant_id` and sits under row-level security."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector import Vector
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    DateTime,
    Dialect,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# The column's dimension is fixed by the migration from RAG_EMBEDDING_DIMENSIONS; the ORM
# type does not need it to read or write vectors.
class BinaryVector(VECTOR):
    """pgvector's column type, sent and read in pgvector's binary format (the asyncpg codec
    `app.db.engine` registers on every connection) instead of text: formatting 384 floats as
    text cost ~0.2 ms of Python per vector, which capped bulk writes and taxed every search."""

    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        return None  # lists, numpy arrays and pgvector Vectors go to the codec as they are

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        def process(value: Vector | None) -> list[float] | None:
            return None if value is None else value.to_list()

        return process


EMBEDDING = BinaryVector()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class TenantOwned:
    """A table of one tenant's rows: row-level security on `tenant_id`, the column it is
    sharded by on Citus, and named in every statement of a tenant session (db/tenancy.py).
    Each table declares its own `tenant_id` (its keys differ); this one is the mixin's own."""

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)


def _created_at() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


def _updated_at() -> Mapped[datetime]:
    return mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class Tenant(Base):
    """The tenant registry. Not tenant-owned data: no RLS, the runtime role cannot delete."""

    __tablename__ = "tenants"
    __table_args__ = (
        CheckConstraint("status in ('active', 'suspended')", name="status"),
        CheckConstraint("id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'", name="id_format"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    tier: Mapped[str] = mapped_column(String(32), nullable=False, server_default="basic")
    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="active")
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _updated_at()


class Collection(TenantOwned, Base):
    __tablename__ = "collections"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)

    # (tenant_id, id): keys hold the column Citus shards by (migration 0011)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(128), nullable=False)
    created_at: Mapped[datetime] = _created_at()


class Document(TenantOwned, Base):
    __tablename__ = "documents"
    __table_args__ = (
        # Identity: (collection, external_id, access list), migration 0008.
        Index(
            "uq_documents_tenant_id_collection_id_external_id_access",
            "tenant_id",
            "collection_id",
            "external_id",
            func.rag_access_key(text("access")),
            unique=True,
        ),
        UniqueConstraint("tenant_id", "id", "access"),
        ForeignKeyConstraint(
            ["tenant_id", "collection_id"],
            ["collections.tenant_id", "collections.id"],
            ondelete="CASCADE",
        ),
        CheckConstraint("char_length(version) <= 256", name="version_length"),
        CheckConstraint(  # migration 0011: the Office, EPUB and ODT types
            "source_type in ('text', 'markdown', 'html', 'pdf', 'docx', 'pptx', 'xlsx', 'epub',"
            " 'odt')",
            name="source_type",
        ),
        Index(None, "tenant_id", "created_at"),
        Index(None, "access", postgresql_using="gin"),
        # migration 0009: a tenant's unrestricted documents (the policy's `access = '{}'`
        # arm) and whether it has restricted ones at all (app/retrieval/visibility.py)
        Index(
            "ix_documents_tenant_id_unrestricted",
            "tenant_id",
            postgresql_where=text("access = '{}'"),
        ),
        Index(
            "ix_documents_tenant_id_restricted",
            "tenant_id",
            postgresql_where=text("access <> '{}'"),
        ),
        Index(
            "ix_documents_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 64},
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
    )

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True, default=uuid.uuid4)
    collection_id: Mapped[uuid.UUID] = mapped_column(UUID, nullable=False)
    external_id: Mapped[str] = mapped_column(String(512), nullable=False)
    title: Mapped[str] = mapped_column(Text, nullable=False)
    source_type: Mapped[str] = mapped_column(String(16), nullable=False)
    source_url: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, nullable=False, server_default="{}"
    )
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    # The source's own revision of it (an etag, a modification time, a commit), as given: what
    # a collection sync compares a reference with (migration 0015, app/ingest/sync.py).
    version: Mapped[str | None] = mapped_column(Text)
    # Who may see it (app/permissions.py); empty: every member of the tenant.
    access: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    chunk_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    # The normalised mean of the chunk vectors (of `embedding_model`): a document's neighbours
    # are one probe of its own HNSW index (app/retrieval/similar.py).
    embedding: Mapped[list[float] | None] = mapped_column(EMBEDDING, deferred=True)
    embedding_model: Mapped[str | None] = mapped_column(String(200))
    # How often search, context and similar returned it (app/retrieval/returns.py). The column
    # keeps its first name, as the replies' `access_count` field does; "access" means permission.
    returned_count: Mapped[int] = mapped_column(
        "access_count", BigInteger, nullable=False, server_default="0"
    )
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _updated_at()


class Chunk(TenantOwned, Base):
    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("tenant_id", "document_id", "chunk_index"),
        # The document's access list too: a chunk's always equals its document's. A change
        # of the document's updates its chunks' in the same statement (ingest/catalog.py).
        ForeignKeyConstraint(
            ["tenant_id", "document_id", "access"],
            ["documents.tenant_id", "documents.id", "documents.access"],
            ondelete="CASCADE",
        ),
        Index(None, "tenant_id", "collection_id"),
        Index(None, "access", postgresql_using="gin"),
        Index(
            "ix_chunks_tenant_id_unrestricted",
            "tenant_id",
            postgresql_where=text("access = '{}'"),
        ),
        Index(
            "ix_chunks_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 64},
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        Index("ix_chunks_search_vector", "search_vector", postgresql_using="gin"),
        Index(
            "ix_chunks_metadata",
            "metadata",
            postgresql_using="gin",
            postgresql_ops={"metadata": "jsonb_path_ops"},
        ),
    )

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True, default=uuid.uuid4)
    document_id: Mapped[uuid.UUID] = mapped_column(UUID, nullable=False)
    collection_id: Mapped[uuid.UUID] = mapped_column(UUID, nullable=False)
    chunk_index: Mapped[int] = mapped_column(Integer, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    page_number: Mapped[int | None] = mapped_column(Integer)
    section_path: Mapped[list[str]] = mapped_column(
        ARRAY(Text), nullable=False, server_default="{}"
    )
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    embedding: Mapped[list[float]] = mapped_column(EMBEDDING, nullable=False)
    embedding_model: Mapped[str] = mapped_column(String(200), nullable=False)
    embedded_text_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    search_vector: Mapped[str] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', content)", persisted=True)
    )
    # Tokens as BM25 counts them (the tsvector's positions); migration 0003.
    search_length: Mapped[int] = mapped_column(
        Integer,
        Computed("rag_tsvector_tokens(to_tsvector('english', content))", persisted=True),
    )
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, nullable=False, server_default="{}"
    )
    # Its document's access list (the foreign key keeps them equal): search filters on it.
    access: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    created_at: Mapped[datetime] = _created_at()


class Bm25Corpus(TenantOwned, Base):
    """Per tenant: how many chunks and tokens it holds (BM25's N and avgdl). Kept with the
    chunks, in the writer's transaction (db/bm25_upkeep.py)."""

    __tablename__ = "bm25_corpus"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    chunks: Mapped[int] = mapped_column(BigInteger, nullable=False)
    tokens: Mapped[int] = mapped_column(BigInteger, nullable=False)


class Bm25Term(TenantOwned, Base):
    """Per tenant and lexeme: in how many chunks it occurs (BM25's df). Kept with the chunks."""

    __tablename__ = "bm25_terms"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    df: Mapped[int] = mapped_column(Integer, nullable=False)


class Bm25Posting(TenantOwned, Base):
    """Per tenant, lexeme and chunk: the lexeme's frequency in the chunk and the chunk's
    length, so keyword search reads its terms' index entries, never the chunks' tsvectors.
    Kept with the chunks; the primary key carries tf and dl (INCLUDE)."""

    __tablename__ = "bm25_postings"

    # No foreign key (its per-row check doubled the write cost): deleting a tenant deletes
    # its postings explicitly (admin/tenants.py).
    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    chunk_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    tf: Mapped[int] = mapped_column(SmallInteger, nullable=False)
    dl: Mapped[int] = mapped_column(Integer, nullable=False)


class AuditEntry(Base):
    """One admin action: who, when, what, and the target before and after. Row-level security
    (migration 0013): a tenant's own entries, or every entry in a ledger transaction; the
    runtime role may insert and read, never change or delete."""

    __tablename__ = "audit_log"
    __table_args__ = (Index(None, "tenant_id", "id"), Index(None, "action", "id"))

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )
    actor_kind: Mapped[str] = mapped_column(String(16), nullable=False)  # token, operator
    actor_subject: Mapped[str] = mapped_column(Text, nullable=False)
    actor_tenant_id: Mapped[str | None] = mapped_column(String(64))
    actor_key_id: Mapped[str | None] = mapped_column(Text)
    action: Mapped[str] = mapped_column(String(64), nullable=False)
    tenant_id: Mapped[str | None] = mapped_column(String(64))
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class TenantUsage(Base):
    """Searches, ingests and rate-limit rejections of one tenant in one 5-minute bucket.
    Counters, no content, under row-level security (migration 0013); written in batches, one
    transaction per tenant, by app/usage.py."""

    __tablename__ = "tenant_usage"
    __table_args__ = (Index(None, "bucket"),)

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    bucket: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    searches: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    ingests: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    rate_limited: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")


class Receipt(TenantOwned, Base):
    """What a sync, a document deletion or a tenant deletion changed, as signed (migration
    0015, app/receipts.py). No key to the tenant registry: a tenant's deletion keeps it."""

    __tablename__ = "receipts"
    __table_args__ = (
        CheckConstraint("kind in ('sync', 'delete', 'tenant_delete')", name="kind"),
        Index(None, "tenant_id", "created_at"),
    )

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    collection: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created_at()
    body: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    signature: Mapped[str | None] = mapped_column(Text)
