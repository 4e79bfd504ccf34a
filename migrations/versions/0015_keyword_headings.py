"""Titles and headings in keyword search: a chunk's BM25 terms are its content's and those of
its document's title and section path, as the embedded text has them.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29

`chunks.heading_vector` holds the tsvector of the heading text (`rag_heading_text(title,
section_path)`: the title, then the path without a first element that repeats the title); the
keyword terms of a chunk are `search_vector || heading_vector` (tsvector concatenation: a
lexeme in both counts the positions of both), its length the tokens of both. NULL means "not
built": such a chunk counts its content only (rows loaded by COPY without it, and existing
chunks until this migration has reached them). The GIN index moves to that expression, which
phrase and exclusion operators filter on.

Existing chunks are rebuilt here in batches, each its own transaction: one tenant's next
`BATCH` chunks without a heading vector take their old terms out of the statistics and
postings, get the vector, and put their new terms in, so the statistics are exact after every
commit. A stopped run starts again where it stopped (`heading_vector IS NULL` marks what is
left; the column and the function are created only if missing). Every statement names one
tenant and sets it for row-level security, so on Citus each goes to that tenant's shard. The
chunks of a document written by a service of the previous version during the run are counted
by that service's rule: stop writers while it runs, or `rag bm25 verify` / `rebuild` after.
"""

from alembic import op
from sqlalchemy import text

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

BATCH = 2000

HEADING_TEXT = """
CREATE OR REPLACE FUNCTION rag_heading_text(title text, section_path text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT concat_ws(E'\\n', nullif(title, ''), nullif(array_to_string(
    CASE WHEN section_path[1] = title THEN section_path[2:] ELSE section_path END, ' '), ''))
$$
"""

# The keyword terms and length of chunk c (app/db/bm25_upkeep.py has the same).
TERMS = "(c.search_vector || coalesce(c.heading_vector, ''::tsvector))"
LENGTH = "(c.search_length + coalesce(rag_tsvector_tokens(c.heading_vector), 0))"
INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_chunks_keyword_terms ON chunks"
    " USING gin ((search_vector || coalesce(heading_vector, ''::tsvector)))"
)

NEXT = text(
    "SELECT id FROM chunks WHERE tenant_id = :tenant AND heading_vector IS NULL"
    " AND id > CAST(:after AS uuid) ORDER BY id LIMIT :batch"
)
OF_BATCH = "c.tenant_id = :tenant AND c.id = ANY(:ids)"
REMOVE = (
    "UPDATE bm25_corpus b SET chunks = b.chunks - d.chunks, tokens = b.tokens - d.tokens"
    f" FROM (SELECT c.tenant_id, count(*) AS chunks, sum({LENGTH}) AS tokens"
    f" FROM chunks c WHERE {OF_BATCH} GROUP BY c.tenant_id) d"
    " WHERE b.tenant_id = :tenant AND b.tenant_id = d.tenant_id",
    "UPDATE bm25_terms t SET df = t.df - d.df"
    " FROM (SELECT c.tenant_id, l.lexeme, count(*) AS df"
    f" FROM chunks c, unnest(tsvector_to_array({TERMS})) AS l(lexeme) WHERE {OF_BATCH}"
    " GROUP BY c.tenant_id, l.lexeme) d"
    " WHERE t.tenant_id = :tenant AND t.tenant_id = d.tenant_id AND t.lexeme = d.lexeme",
    "DELETE FROM bm25_postings p USING (SELECT c.tenant_id, l.lexeme, c.id"
    f" FROM chunks c, unnest(tsvector_to_array({TERMS})) AS l(lexeme) WHERE {OF_BATCH}) d"
    " WHERE p.tenant_id = :tenant AND p.tenant_id = d.tenant_id"
    " AND p.lexeme = d.lexeme AND p.chunk_id = d.id",
)
BUILD = (
    "UPDATE chunks c SET heading_vector ="
    " to_tsvector('english', rag_heading_text(d.title, c.section_path))"
    f" FROM documents d WHERE {OF_BATCH}"
    " AND d.tenant_id = :tenant AND d.tenant_id = c.tenant_id AND d.id = c.document_id"
)
ADD = (
    "INSERT INTO bm25_corpus AS b (tenant_id, chunks, tokens)"
    f" SELECT c.tenant_id, count(*), sum({LENGTH}) FROM chunks c WHERE {OF_BATCH}"
    " GROUP BY c.tenant_id ON CONFLICT (tenant_id) DO UPDATE"
    " SET chunks = b.chunks + excluded.chunks, tokens = b.tokens + excluded.tokens",
    "INSERT INTO bm25_terms AS t (tenant_id, lexeme, df)"
    " SELECT c.tenant_id, l.lexeme, count(*)"
    f" FROM chunks c, unnest(tsvector_to_array({TERMS})) AS l(lexeme) WHERE {OF_BATCH}"
    " GROUP BY c.tenant_id, l.lexeme ORDER BY c.tenant_id, l.lexeme"
    " ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = t.df + excluded.df",
    "INSERT INTO bm25_postings (tenant_id, lexeme, chunk_id, tf, dl)"
    " SELECT c.tenant_id, l.lexeme, c.id, coalesce(array_length(l.positions, 1), 1),"
    f" {LENGTH} FROM chunks c, unnest({TERMS}) AS l WHERE {OF_BATCH}",
)
# The tenant, every document of it (restricted ones too), for this transaction.
SCOPE = text(
    "SELECT set_config('app.tenant_id', :tenant, true),"
    " set_config('app.all_documents', 'on', true), set_config('app.principals', '{}', true)"
)
ZERO = "00000000-0000-0000-0000-000000000000"


def upgrade() -> None:
    bind = op.get_bind()
    op.execute(HEADING_TEXT)
    op.execute("ALTER TABLE chunks ADD COLUMN IF NOT EXISTS heading_vector tsvector")
    bind.commit()  # what a restarted run finds; each batch below commits too
    tenants = [row[0] for row in bind.execute(text("SELECT id FROM tenants ORDER BY id"))]
    bind.commit()
    for tenant in tenants:
        rebuild_tenant(tenant)
    op.execute("DROP INDEX IF EXISTS ix_chunks_search_vector")
    op.execute(INDEX)


def rebuild_tenant(tenant: str) -> None:
    """The tenant's chunks without a heading vector, `BATCH` at a time, one commit each."""
    bind = op.get_bind()
    after = ZERO
    while True:
        bind.execute(SCOPE, {"tenant": tenant})
        params = {"tenant": tenant, "after": after, "batch": BATCH}
        ids = [row[0] for row in bind.execute(NEXT, params)]
        if not ids:
            bind.commit()
            return
        batch = {"tenant": tenant, "ids": ids}
        for statement in (*REMOVE, BUILD, *ADD):
            bind.execute(text(statement), batch)
        bind.commit()
        after = str(ids[-1])


def downgrade() -> None:
    """Back to content-only terms: the statistics and postings are recounted (0007's rule)."""
    op.execute("DROP INDEX IF EXISTS ix_chunks_keyword_terms")
    op.execute("ALTER TABLE chunks DROP COLUMN IF EXISTS heading_vector")
    op.execute("DROP FUNCTION IF EXISTS rag_heading_text(text, text[])")
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_chunks_search_vector ON chunks USING gin (search_vector)"
    )
    unforced = ("chunks", "bm25_corpus", "bm25_terms", "bm25_postings")
    for table in unforced:
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    for statement in (
        "DELETE FROM bm25_postings",
        "DELETE FROM bm25_terms",
        "DELETE FROM bm25_corpus",
        "INSERT INTO bm25_corpus (tenant_id, chunks, tokens)"
        " SELECT tenant_id, count(*), sum(search_length) FROM chunks GROUP BY tenant_id",
        "INSERT INTO bm25_terms (tenant_id, lexeme, df) SELECT c.tenant_id, l.lexeme, count(*)"
        " FROM chunks c, unnest(tsvector_to_array(c.search_vector)) AS l(lexeme)"
        " GROUP BY c.tenant_id, l.lexeme",
        "INSERT INTO bm25_postings (tenant_id, lexeme, chunk_id, tf, dl)"
        " SELECT c.tenant_id, l.lexeme, c.id, coalesce(array_length(l.positions, 1), 1),"
        " c.search_length FROM chunks c, unnest(c.search_vector) AS l",
    ):
        op.execute(statement)
    for table in unforced:
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
