"""The access condition of the policies on documents and chunks, in a form an index can answer.

0008's condition was `access = '{}' OR (SELECT rag_all_documents()) OR access && (SELECT
rag_principals())`. PostgreSQL can read the rows of an OR from indexes only when every arm is
an index condition (a BitmapOr), and a bare boolean is not one: the GIN index on `access` was
never used, so a caller who sees 1% of a large tenant either walked the HNSW graph past the
other 99% (slow, and approximate) or read every row of the tenant (exact, and slower).

The every-document arm becomes `access @> (SELECT rag_every_list())`: `rag_every_list()` is
the empty list when `app.all_documents` is 'on' (every list contains it) and NULL otherwise
(the comparison is NULL, so the arm admits nothing, and an index scan on a NULL key returns
nothing without reading). Same rows for every caller, for reads and for writes; now each arm
is a GIN (or partial btree) condition, and a small visible set is read exactly from the
posting lists of the caller's principals (app/retrieval/visibility.py). Documents get the
partial btree of a tenant's unrestricted rows that chunks have had since 0008, so their
`access = '{}'` arm reads one tenant's rows, not every tenant's, and one of its restricted
rows, so the service can tell in one probe whether a tenant uses access lists at all.
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TENANT = "tenant_id = nullif(current_setting('app.tenant_id', true), '')"
BEFORE = (
    f"{TENANT} AND (access = '{{}}' OR (SELECT rag_all_documents())"
    " OR access && (SELECT rag_principals()))"
)
AFTER = (
    f"{TENANT} AND (access = '{{}}' OR access && (SELECT rag_principals())"
    " OR access @> (SELECT rag_every_list()))"
)
EVERY_LIST = """
    CREATE FUNCTION rag_every_list() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
      SELECT CASE WHEN coalesce(current_setting('app.all_documents', true), '') = 'on'
        THEN '{}'::text[] END
    $$
"""


def _policy(table: str, condition: str) -> None:
    op.execute(
        f"ALTER POLICY tenant_isolation ON {table} USING ({condition}) WITH CHECK ({condition})"
    )


def upgrade() -> None:
    op.execute(EVERY_LIST)
    op.execute(
        "CREATE INDEX ix_documents_tenant_id_unrestricted ON documents (tenant_id)"
        " WHERE access = '{}'"
    )
    op.execute(
        "CREATE INDEX ix_documents_tenant_id_restricted ON documents (tenant_id)"
        " WHERE access <> '{}'"
    )
    for table in ("documents", "chunks"):
        _policy(table, AFTER)


def downgrade() -> None:
    for table in ("documents", "chunks"):
        _policy(table, BEFORE)
    op.execute("DROP INDEX ix_documents_tenant_id_restricted")
    op.execute("DROP INDEX ix_documents_tenant_id_unrestricted")
    op.execute("DROP FUNCTION rag_every_list()")
