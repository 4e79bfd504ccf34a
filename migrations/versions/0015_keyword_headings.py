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
`BATCH` chunks without a heading vector get it, and the statistics and postings take in what
it adds (the headings' tokens, df for lexemes new to a chunk, every posting of the chunks
written again with its tf and the chunk's new length), so they are exact after every commit.
The content-only GIN index is dropped before (the batches need not maintain it) and the index
on the keyword terms built after. A stopped run starts again where it stopped
(`heading_vector IS NULL` marks what is left; the column and the function are created only if
missing). Every statement names one tenant and sets it for row-level security, so on Citus
each goes to that tenant's shard. Chunks that a service of the previous version adds during
the run are picked up by a later batch; but one that deletes a chunk already rebuilt takes out
only its content's terms: stop such writers while it runs, or `rag bm25 verify` / `rebuild`
after. 100,000 chunks took 657 s on two busy cores (docs/BENCHMARKS.md).
"""

from alembic import op
from sqlalchemy import text

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

BATCH = 1000

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
# A batch's chunks have no heading vector: their terms are their content's. Adding a heading
# only adds terms (a lexeme of both counts the positions of both) and tokens, so the batch's
# chunks keep their count, the tenant's tokens grow by the headings' tokens, a lexeme's df by
# the chunks whose heading has it and whose content has not, and every posting of the chunks
# is written again (its tf, and the chunk's length in every one of them) or added.
LOCK = (
    "SELECT tenant_id FROM bm25_corpus WHERE tenant_id = :tenant FOR UPDATE"  # writers' order
)
BUILD = (
    "UPDATE chunks c SET heading_vector ="
    " to_tsvector('english', rag_heading_text(d.title, c.section_path))"
    f" FROM documents d WHERE {OF_BATCH} AND c.heading_vector IS NULL"
    " AND d.tenant_id = :tenant AND d.tenant_id = c.tenant_id AND d.id = c.document_id"
)
ADD = (
    "UPDATE bm25_corpus b SET tokens = b.tokens + d.tokens"
    " FROM (SELECT c.tenant_id, sum(rag_tsvector_tokens(c.heading_vector)) AS tokens"
    f" FROM chunks c WHERE {OF_BATCH} GROUP BY c.tenant_id) d"
    " WHERE b.tenant_id = :tenant AND b.tenant_id = d.tenant_id",
    "INSERT INTO bm25_terms AS t (tenant_id, lexeme, df)"
    " SELECT c.tenant_id, l.lexeme, count(*)"
    " FROM chunks c, unnest(tsvector_to_array(c.heading_vector)) AS l(lexeme)"
    f" WHERE {OF_BATCH} AND l.lexeme <> ALL(tsvector_to_array(c.search_vector))"
    " GROUP BY c.tenant_id, l.lexeme ORDER BY c.tenant_id, l.lexeme"
    " ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = t.df + excluded.df",
    "INSERT INTO bm25_postings AS p (tenant_id, lexeme, chunk_id, tf, dl)"
    " SELECT c.tenant_id, l.lexeme, c.id, coalesce(array_length(l.positions, 1), 1),"
    f" {LENGTH} FROM chunks c, unnest({TERMS}) AS l WHERE {OF_BATCH}"
    " ON CONFLICT (tenant_id, lexeme, chunk_id) DO UPDATE SET tf = excluded.tf, dl = excluded.dl",
)
# The tenant, every document of it (restricted ones too), for this transaction.
SCOPE = text(
    "SELECT set_config('app.tenant_id', :tenant, true),"
    " set_config('app.all_documents', 'on', true), set_config('app.principals', '{}', true)"
)
# On Citus, a function is created or dropped on every node over one connection per node,
# which a transaction that already worked on shards in parallel cannot give.
SEQUENTIAL = (
    "DO $$ BEGIN IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN"
    " SET LOCAL citus.multi_shard_modify_mode TO 'sequential'; END IF; END $$"
)
ZERO = "00000000-0000-0000-0000-000000000000"


def upgrade() -> None:
    bind = op.get_bind()
    bind.commit()  # what earlier revisions of this run did (parallel DDL on Citus) ends here
    op.execute(SEQUENTIAL)
    op.execute(HEADING_TEXT)
    op.execute("ALTER TABLE chunks ADD COLUMN IF NOT EXISTS heading_vector tsvector")
    bind.commit()  # what a restarted run finds; each batch below commits too
    tenants = [row[0] for row in bind.execute(text("SELECT id FROM tenants ORDER BY id"))]
    bind.commit()
    # The content-only index goes first: the batches' updates then need not maintain it.
    op.execute("DROP INDEX IF EXISTS ix_chunks_search_vector")
    bind.commit()
    for tenant in tenants:
        rebuild_tenant(tenant)
    op.execute(INDEX)


def rebuild_tenant(tenant: str) -> None:
    """The tenant's chunks without a heading vector, `BATCH` at a time, one commit each."""
    bind = op.get_bind()
    after = ZERO
    while True:
        bind.execute(SCOPE, {"tenant": tenant})
        bind.execute(text(LOCK), {"tenant": tenant})
        params = {"tenant": tenant, "after": after, "batch": BATCH}
        ids = [row[0] for row in bind.execute(NEXT, params)]
        if not ids:
            bind.commit()
            return
        batch = {"tenant": tenant, "ids": ids}
        for statement in (BUILD, *ADD):
            bind.execute(text(statement), batch)
        bind.commit()
        after = str(ids[-1])


def downgrade() -> None:
    """Back to content-only terms: the statistics and postings are recounted (0007's rule)."""
    op.execute(SEQUENTIAL)
    op.execute("DROP FUNCTION IF EXISTS rag_heading_text(text, text[])")
    op.execute("DROP INDEX IF EXISTS ix_chunks_keyword_terms")
    op.execute("ALTER TABLE chunks DROP COLUMN IF EXISTS heading_vector")
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
