"""A schema Citus can shard by tenant, the same on one server and on a cluster.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

- Keys carry the distribution column: Citus checks uniqueness per shard, so the primary keys
  of collections, documents, chunks, ingest_jobs and ingest_job_inputs become (tenant_id, id),
  and (document_id, chunk_index) / (job_id, position) gain tenant_id. The (tenant_id, id)
  unique constraints they make redundant go; the foreign keys that pointed at them now point
  at the primary keys.
- A chunk's access list still equals its document's: the foreign key (tenant_id, document_id,
  access) stays, without ON UPDATE CASCADE (Citus refuses a cascading update of a key that
  holds the distribution column). A change of a document's list updates the document and its
  chunks in one statement (app/ingest/catalog.py): the key is checked at its end.
- The policies on documents and chunks hold no subquery (Citus refuses one in a policy):
  `rag_principals()` and `rag_every_list()` are single-expression SQL functions the planner
  inlines, so each is a stable expression, read once per scan when it is an index condition
  (the GIN indexes on `access`), as the InitPlans of 0009 were. `app.principals` is now a
  text-array literal (`{"user:a","group:b"}`), which the function casts, not a JSON array.
- BM25 statistics and postings are kept by the service in the writer's transaction
  (app/db/bm25_upkeep.py), not by statement triggers: a trigger's transition table cannot be
  read by the statements Citus sends on from a shard. The triggers and their functions go.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TENANT = "tenant_id = nullif(current_setting('app.tenant_id', true), '')"
VISIBLE = f"{TENANT} AND (access = '{{}}' OR access && rag_principals() OR access @> rag_every_list())"
SUBQUERIES = (
    f"{TENANT} AND (access = '{{}}' OR access && (SELECT rag_principals())"
    " OR access @> (SELECT rag_every_list()))"
)
PRINCIPALS = """
CREATE OR REPLACE FUNCTION rag_principals() RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(nullif(current_setting('app.principals', true), ''), '{}')::text[]
$$
"""
PRINCIPALS_JSON = """
CREATE OR REPLACE FUNCTION rag_principals() RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(p), '{}') FROM jsonb_array_elements_text(
    coalesce(nullif(current_setting('app.principals', true), ''), '[]')::jsonb) AS p
$$
"""

# (table, key columns before, after); the unique constraints keep their names.
PRIMARY_KEYS = (
    ("collections", "id", "tenant_id, id"),
    ("documents", "id", "tenant_id, id"),
    ("chunks", "id", "tenant_id, id"),
    ("ingest_jobs", "id", "tenant_id, id"),
    ("ingest_job_inputs", "id", "tenant_id, id"),
)
UNIQUES = (
    ("chunks", "uq_chunks_document_id_chunk_index", "document_id, chunk_index"),
    ("ingest_job_inputs", "uq_ingest_job_inputs_job_id_position", "job_id, position"),
)
REDUNDANT = (  # (tenant_id, id): now the primary key
    ("collections", "uq_collections_tenant_id_id"),
    ("documents", "uq_documents_tenant_id_id"),
    ("ingest_jobs", "uq_ingest_jobs_tenant_id_id"),
)
# (table, name, definition): the keys that point at the constraints above
FOREIGN_KEYS = (
    (
        "documents",
        "fk_documents_tenant_id_collections",
        "FOREIGN KEY (tenant_id, collection_id) REFERENCES collections (tenant_id, id)"
        " ON DELETE CASCADE",
    ),
    (
        "ingest_job_inputs",
        "fk_ingest_job_inputs_tenant_id_ingest_jobs",
        "FOREIGN KEY (tenant_id, job_id) REFERENCES ingest_jobs (tenant_id, id) ON DELETE CASCADE",
    ),
)
CHUNK_DOCUMENT = (
    "FOREIGN KEY (tenant_id, document_id, access) REFERENCES documents (tenant_id, id, access)"
    " ON DELETE CASCADE"
)
TRIGGERS = (
    "bm25_chunks_insertd",
    "bm25_chunks_deleted",
    "bm25_chunks_updated",
    "bm25_postings_inserted",
    "bm25_postings_deleted",
    "bm25_postings_updated",
)


def upgrade() -> None:
    for trigger in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON chunks")
        op.execute(f"DROP FUNCTION IF EXISTS {trigger}()")
    for table, name, _ in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    op.execute("ALTER TABLE chunks DROP CONSTRAINT fk_chunks_tenant_id_documents")
    for table, _, after in PRIMARY_KEYS:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT pk_{table},"
            f" ADD CONSTRAINT pk_{table} PRIMARY KEY ({after})"
        )
    for table, name, columns in UNIQUES:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {name},"
            f" ADD CONSTRAINT {name} UNIQUE (tenant_id, {columns})"
        )
    for table, name in REDUNDANT:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for table, name, definition in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    op.execute(f"ALTER TABLE chunks ADD CONSTRAINT fk_chunks_tenant_id_documents {CHUNK_DOCUMENT}")
    op.execute(PRINCIPALS)
    for table in ("documents", "chunks"):
        op.execute(
            f"ALTER POLICY tenant_isolation ON {table} USING ({VISIBLE}) WITH CHECK ({VISIBLE})"
        )


def _sibling(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _restore_triggers() -> None:
    """0003's and 0007's statement triggers, as they made them."""
    statistics, postings = _sibling("0003_bm25_statistics"), _sibling("0007_bm25_postings")
    for event, body, tables in (
        ("insert", statistics._added(statistics.INSERTED), "NEW TABLE AS new_chunks"),
        ("delete", statistics.SUBTRACT_DELETED, "OLD TABLE AS old_chunks"),
        ("update", statistics._added(statistics.UPDATED), "OLD TABLE AS old_chunks NEW TABLE AS new_chunks"),
    ):
        op.execute(statistics._trigger_function(f"bm25_chunks_{event}d", body))
        op.execute(
            f"CREATE TRIGGER bm25_chunks_{event}d AFTER {event.upper()} ON chunks"
            f" REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION bm25_chunks_{event}d()"
        )
    for event, (body, tables) in postings.BODIES.items():
        name = f"bm25_postings_{event.rstrip('e')}ed"
        op.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN {body} RETURN NULL; END $$"
        )
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event.upper()} ON chunks"
            f" REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
        )


def downgrade() -> None:
    """Back to 0010's keys, policies and statement triggers."""
    _restore_triggers()
    for table in ("documents", "chunks"):
        op.execute(
            f"ALTER POLICY tenant_isolation ON {table} USING ({SUBQUERIES})"
            f" WITH CHECK ({SUBQUERIES})"
        )
    op.execute(PRINCIPALS_JSON)
    op.execute("ALTER TABLE chunks DROP CONSTRAINT fk_chunks_tenant_id_documents")
    for table, name, _ in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for table, name in REDUNDANT:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE (tenant_id, id)")
    for table, name, columns in UNIQUES:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} UNIQUE ({columns})"
        )
    for table, before, _ in PRIMARY_KEYS:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT pk_{table},"
            f" ADD CONSTRAINT pk_{table} PRIMARY KEY ({before})"
        )
    for table, name, definition in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    op.execute(
        "ALTER TABLE chunks ADD CONSTRAINT fk_chunks_tenant_id_documents"
        f" {CHUNK_DOCUMENT} ON UPDATE CASCADE"
    )
