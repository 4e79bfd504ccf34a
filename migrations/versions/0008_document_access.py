"""Document-level permissions inside a tenant: access lists, enforced by row-level security.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

- `documents.access` and `chunks.access` (text[], '{}' = every member of the tenant): the
  principals (`user:<sub>`, `group:<name>`) who may see the document.
- A chunk's access always equals its document's: the foreign key from chunks to documents
  now carries `access` too, with ON UPDATE CASCADE, so changing a document's list rewrites its
  chunks' in the same statement (referential actions bypass row-level security) and a chunk
  written with another list is refused. Vector search filters on the chunk row, no join.
- The policies on `documents` and `chunks` become: the tenant matches AND (no access list OR
  the caller sees every document OR the list overlaps the caller's principals), for reads and
  writes. The caller's principals (`app.principals`, a JSON array) and the all-documents flag
  (`app.all_documents` = 'on') are transaction-local settings set beside `app.tenant_id`
  (app/db/tenancy.py). Unset, they mean no principal and no flag: only unrestricted documents.
  Each is read once per statement (the functions sit in scalar subqueries: InitPlans).
- A document is identified by (collection, external_id, access list): two callers who cannot
  see each other's documents never collide on an external id, so no conflict can reveal that
  an invisible document exists (docs/PERMISSIONS.md).
- `ingest_jobs.submitter` and `.readers`: a background job writes its documents as the caller
  who submitted it, and its results (which name them) are shown to that caller only.
- GIN indexes on both `access` columns, and a partial btree on a tenant's unrestricted chunks:
  a search reads the chunks of a small visible set exactly through them (the planner sees the
  caller's principals as constants, app/retrieval/visibility.py).
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TENANT = "tenant_id = nullif(current_setting('app.tenant_id', true), '')"
VISIBLE = (
    f"{TENANT} AND (access = '{{}}' OR (SELECT rag_all_documents())"
    " OR access && (SELECT rag_principals()))"
)

FUNCTIONS = (
    """
    CREATE FUNCTION rag_principals() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
      SELECT coalesce(array_agg(p), '{}') FROM jsonb_array_elements_text(
        coalesce(nullif(current_setting('app.principals', true), ''), '[]')::jsonb) AS p
    $$
    """,
    """
    CREATE FUNCTION rag_all_documents() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
      SELECT coalesce(current_setting('app.all_documents', true), '') = 'on'
    $$
    """,
    # The identity of an access list for the unique key: principals hold no control
    # character (app/access.py), so the unit separator joins them unambiguously.
    """
    CREATE FUNCTION rag_access_key(access text[]) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
      SELECT md5(array_to_string(access, chr(31)))
    $$
    """,
)


def _policy(table: str, condition: str) -> None:
    op.execute(f"DROP POLICY tenant_isolation ON {table}")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {table} USING ({condition}) WITH CHECK ({condition})"
    )


def upgrade() -> None:
    for statement in FUNCTIONS:
        op.execute(statement)
    for table in ("documents", "chunks"):
        op.execute(f"ALTER TABLE {table} ADD COLUMN access text[] NOT NULL DEFAULT '{{}}'")
        op.execute(f"CREATE INDEX ix_{table}_access ON {table} USING gin (access)")
    # A tenant's unrestricted chunks, for the exact plan of a small visible set: the GIN index
    # cannot narrow `access = '{}'` to one tenant (every tenant without lists matches it).
    op.execute(
        "CREATE INDEX ix_chunks_tenant_id_unrestricted ON chunks (tenant_id)"
        " WHERE access = '{}'"
    )
    op.execute(
        "ALTER TABLE documents DROP CONSTRAINT uq_documents_tenant_id_collection_id_external_id"
    )
    op.execute(
        "CREATE UNIQUE INDEX uq_documents_tenant_id_collection_id_external_id_access ON documents"
        " (tenant_id, collection_id, external_id, rag_access_key(access))"
    )
    op.execute(
        "ALTER TABLE documents ADD CONSTRAINT uq_documents_tenant_id_id_access"
        " UNIQUE (tenant_id, id, access)"
    )
    op.execute("ALTER TABLE chunks DROP CONSTRAINT fk_chunks_tenant_id_documents")
    op.execute(
        "ALTER TABLE chunks ADD CONSTRAINT fk_chunks_tenant_id_documents"
        " FOREIGN KEY (tenant_id, document_id, access)"
        " REFERENCES documents (tenant_id, id, access) ON DELETE CASCADE ON UPDATE CASCADE"
    )
    for table in ("documents", "chunks"):
        _policy(table, VISIBLE)
    # Who submitted a job ('user:<sub>'), and the readers its documents are written as.
    op.execute("ALTER TABLE ingest_jobs ADD COLUMN submitter text, ADD COLUMN readers jsonb")


def downgrade() -> None:
    op.execute("ALTER TABLE ingest_jobs DROP COLUMN submitter, DROP COLUMN readers")
    for table in ("documents", "chunks"):
        _policy(table, TENANT)
    op.execute("ALTER TABLE chunks DROP CONSTRAINT fk_chunks_tenant_id_documents")
    op.execute(
        "ALTER TABLE chunks ADD CONSTRAINT fk_chunks_tenant_id_documents"
        " FOREIGN KEY (tenant_id, document_id) REFERENCES documents (tenant_id, id)"
        " ON DELETE CASCADE"
    )
    op.execute("ALTER TABLE documents DROP CONSTRAINT uq_documents_tenant_id_id_access")
    op.execute("DROP INDEX uq_documents_tenant_id_collection_id_external_id_access")
    # Fails while two documents share (collection, external_id) under different access
    # lists: delete or rename one of each pair first.
    op.execute(
        "ALTER TABLE documents ADD CONSTRAINT uq_documents_tenant_id_collection_id_external_id"
        " UNIQUE (tenant_id, collection_id, external_id)"
    )
    op.execute("DROP INDEX ix_chunks_tenant_id_unrestricted")
    for table in ("documents", "chunks"):
        op.execute(f"DROP INDEX ix_{table}_access")
        op.execute(f"ALTER TABLE {table} DROP COLUMN access")
    for name in ("rag_access_key(text[])", "rag_all_documents()", "rag_principals()"):
        op.execute(f"DROP FUNCTION {name}")
