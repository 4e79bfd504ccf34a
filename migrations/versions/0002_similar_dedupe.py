"""Document vectors for similar/dedupe, and access counts for keep_most_accessed.

`documents.embedding` is the normalised mean of the document's chunk vectors (for the model in
`documents.embedding_model`), with its own HNSW index: a document's neighbours are one index
probe. `documents.access_count` counts how often search, context and similar returned the
document (flushed from the process in the background, app/retrieval/returns.py).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import Vector

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


BACKFILL = """
UPDATE documents d SET embedding = v.mean, embedding_model = v.model
FROM (
    SELECT document_id, l2_normalize(avg(embedding)) AS mean, min(embedding_model) AS model
    FROM chunks WHERE embedding IS NOT NULL
    GROUP BY document_id HAVING count(DISTINCT embedding_model) = 1
) v
WHERE v.document_id = d.id
"""


def upgrade() -> None:
    dimensions = int(context.config.attributes.get("embedding_dimensions", 384))
    op.add_column("documents", sa.Column("embedding", Vector(dimensions), nullable=True))
    op.add_column("documents", sa.Column("embedding_model", sa.String(200), nullable=True))
    op.add_column(
        "documents",
        sa.Column("access_count", sa.BigInteger(), server_default="0", nullable=False),
    )
    # Backfill, tenant by tenant (RLS is forced, even for the owner): documents whose chunks
    # all carry one model.
    conn = op.get_bind()
    for (tenant_id,) in conn.execute(sa.text("SELECT id FROM tenants")).all():
        conn.execute(sa.text("SELECT set_config('app.tenant_id', :t, true)"), {"t": tenant_id})
        conn.execute(sa.text(BACKFILL))
    op.create_index(
        "ix_documents_embedding_hnsw",
        "documents",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def downgrade() -> None:
    op.drop_index("ix_documents_embedding_hnsw", table_name="documents")
    op.drop_column("documents", "access_count")
    op.drop_column("documents", "embedding_model")
    op.drop_column("documents", "embedding")
