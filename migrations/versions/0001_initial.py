"""Initial schema: tenants, collections, documents, chunks; indexes; runtime role; RLS.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TENANT_OWNED = ("collections", "documents", "chunks")


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    ]


def upgrade() -> None:
    dimensions = int(context.config.attributes.get("embedding_dimensions", 384))
    app_role = context.config.attributes.get("app_role", "rag_app")
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "tenants",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("tier", sa.String(32), server_default="basic", nullable=False),
        sa.Column("status", sa.String(16), server_default="active", nullable=False),
        *_timestamps(),
        sa.CheckConstraint("status in ('active', 'suspended')", name="ck_tenants_status"),
        sa.CheckConstraint("id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'", name="ck_tenants_id_format"),
        sa.PrimaryKeyConstraint("id", name="pk_tenants"),
    )
    op.create_table(
        "collections",
        sa.Column("id", pg.UUID(), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_collections"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE", name="fk_collections_tenant_id_tenants"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_collections_tenant_id_name"),
        sa.UniqueConstraint("tenant_id", "id", name="uq_collections_tenant_id_id"),
    )
    op.create_table(
        "documents",
        sa.Column("id", pg.UUID(), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("collection_id", pg.UUID(), nullable=False),
        sa.Column("external_id", sa.String(512), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("source_type", sa.String(16), nullable=False),
        sa.Column("source_url", sa.Text(), nullable=True),
        sa.Column("metadata", pg.JSONB(), server_default="{}", nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("chunk_count", sa.Integer(), server_default="0", nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name="pk_documents"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE", name="fk_documents_tenant_id_tenants"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "collection_id"], ["collections.tenant_id", "collections.id"],
            ondelete="CASCADE", name="fk_documents_tenant_id_collections",
        ),
        sa.UniqueConstraint("tenant_id", "collection_id", "external_id", name="uq_documents_tenant_id_collection_id_external_id"),
        sa.UniqueConstraint("tenant_id", "id", name="uq_documents_tenant_id_id"),
        sa.CheckConstraint("source_type in ('text', 'markdown', 'html', 'pdf')", name="ck_documents_source_type"),
    )
    op.create_index("ix_documents_tenant_id_created_at", "documents", ["tenant_id", "created_at"])
    op.create_table(
        "chunks",
        sa.Column("id", pg.UUID(), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("document_id", pg.UUID(), nullable=False),
        sa.Column("collection_id", pg.UUID(), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("page_number", sa.Integer(), nullable=True),
        sa.Column("section_path", pg.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("embedding", Vector(dimensions), nullable=False),
        sa.Column("embedding_model", sa.String(200), nullable=False),
        sa.Column("embedded_text_hash", sa.String(64), nullable=False),
        sa.Column(
            "search_vector", pg.TSVECTOR(),
            sa.Computed("to_tsvector('english', content)", persisted=True), nullable=False,
        ),
        sa.Column("metadata", pg.JSONB(), server_default="{}", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_chunks"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "document_id"], ["documents.tenant_id", "documents.id"],
            ondelete="CASCADE", name="fk_chunks_tenant_id_documents",
        ),
        sa.UniqueConstraint("document_id", "chunk_index", name="uq_chunks_document_id_chunk_index"),
    )
    # The btree on tenant_id lets the planner answer small tenants exactly (DESIGN.md).
    op.create_index("ix_chunks_tenant_id_collection_id", "chunks", ["tenant_id", "collection_id"])
    op.create_index(
        "ix_chunks_embedding_hnsw", "chunks", ["embedding"], postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_index("ix_chunks_search_vector", "chunks", ["search_vector"], postgresql_using="gin")
    op.create_index(
        "ix_chunks_metadata", "chunks", ["metadata"], postgresql_using="gin",
        postgresql_ops={"metadata": "jsonb_path_ops"},
    )

    _create_runtime_role(app_role)
    for table in TENANT_OWNED:
        _isolate(table)


def _create_runtime_role(role: str) -> None:
    """The role the service connects as: no superuser, not the owner, no BYPASSRLS.

    The migration creates it without LOGIN; `rag migrate` gives it LOGIN and the password of
    RAG_DATABASE_URL, which never belongs in a migration.
    """
    op.execute(
        f"""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
            CREATE ROLE {role} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
          END IF;
        END $$
        """
    )
    op.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON tenants TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(TENANT_OWNED)} TO {role}")


def _isolate(table: str) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"""
        CREATE POLICY tenant_isolation ON {table}
          USING (tenant_id = nullif(current_setting('app.tenant_id', true), ''))
          WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), ''))
        """
    )


def downgrade() -> None:
    for table in reversed(TENANT_OWNED):
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
    op.drop_table("chunks")
    op.drop_table("documents")
    op.drop_table("collections")
    op.drop_table("tenants")
