"""BM25 term statistics per tenant, kept exact by triggers on chunks.

Revision ID: 0003
Revises: 0001
Create Date: 2026-11-23

- `chunks.search_length`: the chunk's length in tokens as BM25 counts it (the positions of
  its tsvector), stored beside `search_vector` and computed by the same analyser.
- `bm25_corpus` (tenant_id, chunks, tokens): N and the total length, so avgdl = tokens / N.
- `bm25_terms` (tenant_id, lexeme, df): in how many of the tenant's chunks each lexeme occurs.

Both tables are tenant-owned: RLS enabled and forced, the same policy as every other table.
Statement-level AFTER triggers on `chunks` (with transition tables: one aggregated upsert per
statement, not one per row) add and subtract the rows a statement inserted, deleted or changed,
in the writer's own transaction and under its RLS, so the statistics are exact whenever the
chunks are: ingest, re-ingest, delete (also by cascade), reindex, any future write path.
Every statement first locks its tenant's `bm25_corpus` row, so concurrent writers of one
tenant queue there instead of deadlocking on term rows. A lexeme whose df falls to 0 keeps its
row (df 0 never scores); `rag bm25 rebuild` drops them.
"""

from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

STATS_TABLES = ("bm25_corpus", "bm25_terms")

TOKEN_COUNT = """
CREATE FUNCTION rag_tsvector_tokens(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0)::integer FROM unnest(v)
$$
"""

# The three triggers share two statements, written once here with the transition table's name.
CORPUS_ADD = """
  INSERT INTO bm25_corpus AS c (tenant_id, chunks, tokens)
  SELECT tenant_id, sum(sign), sum(sign * search_length) FROM {delta}
  GROUP BY tenant_id ORDER BY tenant_id
  ON CONFLICT (tenant_id) DO UPDATE
    SET chunks = c.chunks + excluded.chunks, tokens = c.tokens + excluded.tokens;
"""
TERMS_ADD = """
  INSERT INTO bm25_terms AS t (tenant_id, lexeme, df)
  SELECT d.tenant_id, l.lexeme, sum(d.sign)
  FROM {delta} d, unnest(tsvector_to_array(d.search_vector)) AS l(lexeme)
  GROUP BY d.tenant_id, l.lexeme HAVING sum(d.sign) <> 0
  ORDER BY d.tenant_id, l.lexeme
  ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = t.df + excluded.df;
"""


def _trigger_function(name: str, body: str) -> str:
    return f"""
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
{body}
  RETURN NULL;
END $$
"""


def _added(delta: str) -> str:
    """Upserts: rows the statement added (sign 1) or took away (sign -1)."""
    return "\n".join(
        f"  WITH delta AS ({delta})\n{statement.format(delta='delta').rstrip()}"
        for statement in (CORPUS_ADD, TERMS_ADD)
    )


# A delete only subtracts from rows that exist: no insert that could meet a tenant being
# deleted (its statistics go by cascade) or an unset app.tenant_id.
SUBTRACT_DELETED = """
  UPDATE bm25_corpus c SET chunks = c.chunks - d.chunks, tokens = c.tokens - d.tokens
  FROM (SELECT tenant_id, count(*) AS chunks, sum(search_length) AS tokens
        FROM old_chunks GROUP BY tenant_id) d
  WHERE c.tenant_id = d.tenant_id;
  UPDATE bm25_terms t SET df = t.df - d.df
  FROM (SELECT o.tenant_id, l.lexeme, count(*) AS df
        FROM old_chunks o, unnest(tsvector_to_array(o.search_vector)) AS l(lexeme)
        GROUP BY o.tenant_id, l.lexeme) d
  WHERE t.tenant_id = d.tenant_id AND t.lexeme = d.lexeme;
"""

INSERTED = "SELECT tenant_id, search_vector, search_length, 1 AS sign FROM new_chunks"
# An UPDATE counts only where the text changed (a reindex rewrites vectors, not text).
UPDATED = """
  SELECT n.tenant_id, n.search_vector, n.search_length, 1 AS sign
  FROM new_chunks n JOIN old_chunks o ON o.id = n.id
  WHERE (o.tenant_id, o.search_vector) IS DISTINCT FROM (n.tenant_id, n.search_vector)
  UNION ALL
  SELECT o.tenant_id, o.search_vector, o.search_length, -1
  FROM old_chunks o JOIN new_chunks n ON n.id = o.id
  WHERE (o.tenant_id, o.search_vector) IS DISTINCT FROM (n.tenant_id, n.search_vector)
"""

# The statistics of the data already there (the same recount `rag bm25 rebuild` does).
BUILD = (
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
)


def upgrade() -> None:
    app_role = context.config.attributes.get("app_role", "rag_app")
    op.execute(TOKEN_COUNT)
    op.execute(
        "ALTER TABLE chunks ADD COLUMN search_length integer GENERATED ALWAYS AS "
        "(rag_tsvector_tokens(to_tsvector('english', content))) STORED NOT NULL"
    )
    # Uncompressed (out of line when the row is large): BM25 reads the tsvector of every
    # candidate, and pglz decompression was most of that (2x faster measured on NFCorpus).
    # Applies to rows written from now on.
    op.execute("ALTER TABLE chunks ALTER COLUMN search_vector SET STORAGE EXTERNAL")
    op.execute(
        """
        CREATE TABLE bm25_corpus (
          tenant_id varchar(64) NOT NULL,
          chunks bigint NOT NULL,
          tokens bigint NOT NULL,
          CONSTRAINT pk_bm25_corpus PRIMARY KEY (tenant_id),
          CONSTRAINT fk_bm25_corpus_tenant_id_tenants FOREIGN KEY (tenant_id)
            REFERENCES tenants (id) ON DELETE CASCADE
        )
        """
    )
    op.execute(
        """
        CREATE TABLE bm25_terms (
          tenant_id varchar(64) NOT NULL,
          lexeme text NOT NULL,
          df integer NOT NULL,
          CONSTRAINT pk_bm25_terms PRIMARY KEY (tenant_id, lexeme),
          CONSTRAINT fk_bm25_terms_tenant_id_tenants FOREIGN KEY (tenant_id)
            REFERENCES tenants (id) ON DELETE CASCADE
        )
        """
    )
    for statement in BUILD:
        op.execute(statement)
    for table in STATS_TABLES:
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {app_role}")
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"""
            CREATE POLICY tenant_isolation ON {table}
              USING (tenant_id = nullif(current_setting('app.tenant_id', true), ''))
              WITH CHECK (tenant_id = nullif(current_setting('app.tenant_id', true), ''))
            """
        )
    for event, body, tables in (
        ("insert", _added(INSERTED), "NEW TABLE AS new_chunks"),
        ("delete", SUBTRACT_DELETED, "OLD TABLE AS old_chunks"),
        ("update", _added(UPDATED), "OLD TABLE AS old_chunks NEW TABLE AS new_chunks"),
    ):
        op.execute(_trigger_function(f"bm25_chunks_{event}d", body))
        op.execute(
            f"""
            CREATE TRIGGER bm25_chunks_{event}d AFTER {event.upper()} ON chunks
              REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION bm25_chunks_{event}d()
            """
        )


def downgrade() -> None:
    for event in ("insert", "delete", "update"):
        op.execute(f"DROP TRIGGER IF EXISTS bm25_chunks_{event}d ON chunks")
        op.execute(f"DROP FUNCTION IF EXISTS bm25_chunks_{event}d()")
    for table in STATS_TABLES:
        op.execute(f"DROP TABLE IF EXISTS {table}")
    op.execute("ALTER TABLE chunks DROP COLUMN IF EXISTS search_length")
    op.execute("DROP FUNCTION IF EXISTS rag_tsvector_tokens(tsvector)")
