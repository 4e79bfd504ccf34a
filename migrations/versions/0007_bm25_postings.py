"""BM25 postings: one row per (tenant, lexeme, chunk) with the term's frequency and the chunk's
length, kept by triggers on chunks beside the statistics of 0003.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

Keyword search used to read each candidate chunk's tsvector (out of line, ~14 us a candidate)
to find the query terms' frequencies: 100 ms at the median for a 50,000-chunk tenant. With
postings, a query reads the index entries of its own terms only (an index-only scan of
`pk_bm25_postings`, which carries `tf` and `dl`) and never touches the chunks it will not
return. The table is tenant-owned: RLS enabled and forced, the same policy as every other.
Statement-level AFTER triggers (transition tables) add the postings of inserted chunks, remove
those of deleted ones (cascades included) and replace them when a chunk's text changes, in the
writer's transaction, so postings are exactly the committed chunks' terms. No foreign key:
its per-row check doubled the cost of writing postings (2,000 chunks: 3.2 s of postings with
it, 1.2 s without). A deleted tenant's chunks go by cascade, and the delete trigger removes
their postings (referential actions run as the owner with RLS not forced, and so does the
trigger they fire; tests/api/test_admin.py checks nothing is left).

The postings of existing chunks are built here, and the statistics of 0003 are recounted:
0003's build ran as the owner under *forced* RLS with no tenant set, so it saw no chunk and a
database that had chunks before 0003 was left with empty statistics. Both builds now run with
RLS forced off for the owner, inside this migration's transaction, and forced on again.
"""

from alembic import context, op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

POSTINGS_OF = """
  SELECT {alias}.tenant_id, l.lexeme, {alias}.id AS chunk_id,
         coalesce(array_length(l.positions, 1), 1) AS tf, {alias}.search_length AS dl
  FROM {table} {alias}, unnest({alias}.search_vector) AS l
"""
ADD = "  INSERT INTO bm25_postings (tenant_id, lexeme, chunk_id, tf, dl)\n" + POSTINGS_OF
REMOVE = """
  DELETE FROM bm25_postings p
  USING (SELECT o.tenant_id, l.lexeme, o.id
         FROM {table} o, unnest(tsvector_to_array(o.search_vector)) AS l(lexeme)) d
  WHERE p.tenant_id = d.tenant_id AND p.lexeme = d.lexeme AND p.chunk_id = d.id;
"""
# An UPDATE changes postings only where the text (or the tenant) changed: a reindex rewrites
# vectors, not text.
CHANGED = """
  (SELECT {alias}.* FROM {table} {alias} JOIN {other} x ON x.id = {alias}.id
   WHERE ({alias}.tenant_id, {alias}.search_vector) IS DISTINCT FROM (x.tenant_id, x.search_vector))
"""

BODIES = {
    "insert": (ADD.format(alias="n", table="new_chunks") + ";", "NEW TABLE AS new_chunks"),
    "delete": (REMOVE.format(table="old_chunks"), "OLD TABLE AS old_chunks"),
    "update": (
        REMOVE.format(table=CHANGED.format(alias="o2", table="old_chunks", other="new_chunks"))
        + ADD.format(
            alias="n", table=CHANGED.format(alias="n2", table="new_chunks", other="old_chunks")
        )
        + ";",
        "OLD TABLE AS old_chunks NEW TABLE AS new_chunks",
    ),
}


# As the owner with RLS not forced: the tables' owner then sees every tenant's rows.
UNFORCED = ("chunks", "bm25_corpus", "bm25_terms", "bm25_postings")
RECOUNT = (
    "DELETE FROM bm25_terms",
    "DELETE FROM bm25_corpus",
    """
    INSERT INTO bm25_corpus (tenant_id, chunks, tokens)
    SELECT tenant_id, count(*), sum(search_length) FROM chunks GROUP BY tenant_id
    """,
    """
    INSERT INTO bm25_terms (tenant_id, lexeme, df)
    SELECT c.tenant_id, l.lexeme, count(*)
    FROM chunks c, unnest(tsvector_to_array(c.search_vector)) AS l(lexeme)
    GROUP BY c.tenant_id, l.lexeme
    """,
    "INSERT INTO bm25_postings (tenant_id, lexeme, chunk_id, tf, dl)"
    + POSTINGS_OF.format(alias="c", table="chunks"),
)


def upgrade() -> None:
    app_role = context.config.attributes.get("app_role", "rag_app")
    op.execute(
        """
        CREATE TABLE bm25_postings (
          tenant_id varchar(64) NOT NULL,
          lexeme text NOT NULL,
          chunk_id uuid NOT NULL,
          tf smallint NOT NULL,
          dl integer NOT NULL,
          CONSTRAINT pk_bm25_postings PRIMARY KEY (tenant_id, lexeme, chunk_id) INCLUDE (tf, dl)
        )
        """
    )
    for table in UNFORCED:
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    for statement in RECOUNT:
        op.execute(statement)
    for table in UNFORCED:
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON bm25_postings TO {app_role}")
    op.execute("ALTER TABLE bm25_postings ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE bm25_postings FORCE ROW LEVEL SECURITY")
    op.execute(
        """
        CREATE POLICY tenant_isolation ON bm25_postings
          USING (tenant_id = nullif(current_setting('app.tenant_id', true), ''))
          WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), ''))
        """
    )
    for event, (body, tables) in BODIES.items():
        name = f"bm25_postings_{event.rstrip('e')}ed"  # ..._inserted, _deleted, _updated
        op.execute(
            f"""
            CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
            {body}
              RETURN NULL;
            END $$
            """
        )
        op.execute(
            f"""
            CREATE TRIGGER {name} AFTER {event.upper()} ON chunks
              REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION {name}()
            """
        )


def downgrade() -> None:
    for event in BODIES:
        name = f"bm25_postings_{event.rstrip('e')}ed"
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON chunks")
        op.execute(f"DROP FUNCTION IF EXISTS {name}()")
    op.execute("DROP TABLE IF EXISTS bm25_postings")
