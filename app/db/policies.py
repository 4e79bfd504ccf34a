"""Row-level security as it stands: the policy on every tenant table, and the helpers that
migrations use to set one.

Every table in `POLICIES` has row-level security enabled and forced (the tables' owner is
held by it too) and one policy, `tenant_isolation`, for every command and role, with the same
condition for the rows it reads (USING) and writes (WITH CHECK). A transaction sees the rows of
the tenant in `app.tenant_id` (set per transaction, app/db/tenancy.py) and nothing without one:
on a reused connection the unset setting reads `''`, which `nullif` turns into NULL.

tests/db/test_policies.py holds this module against `pg_policies` of a freshly migrated
database: a migration that adds or changes a policy changes `POLICIES` in the same commit.
"""

from __future__ import annotations

from alembic import op

POLICY = "tenant_isolation"

TENANT = "tenant_id = nullif(current_setting('app.tenant_id', true), '')"
"""The tenant of the transaction, and no rows without one."""

VISIBLE = (
    f"{TENANT} AND (access = '{{}}' OR access && rag_principals() OR access @> rag_every_list())"
)
"""Documents and their chunks: the tenant's rows that the caller may read. An empty `access`
list is open to the whole tenant; otherwise it must share a principal with the caller
(`rag_principals()`, from `app.principals`), or the caller reads every document
(`rag_every_list()` is `'{}'` when `app.all_documents` is 'on', NULL otherwise). Each arm is an
index condition, and the functions are single SQL expressions the planner inlines (Citus
refuses a subquery in a policy). docs/PERMISSIONS.md."""

OWN_OR_LEDGERS = f"{TENANT} OR current_setting('app.ledgers', true) = 'on'"
"""The audit log and the usage counters: a tenant's own rows, or every row in the transactions
that read or write across tenants (`ledger_transaction`, app/db/tenancy.py)."""

POLICIES: dict[str, str] = {
    "collections": TENANT,
    "documents": VISIBLE,
    "chunks": VISIBLE,
    "bm25_corpus": TENANT,
    "bm25_terms": TENANT,
    "bm25_postings": TENANT,
    "ingest_jobs": TENANT,
    "ingest_job_inputs": TENANT,
    "receipts": TENANT,
    "audit_log": OWN_OR_LEDGERS,
    "tenant_usage": OWN_OR_LEDGERS,
}
"""Each tenant table and the condition of its policy, for reads and writes alike."""


def isolate(table: str, condition: str) -> None:
    """In a migration: row-level security on `table`, enabled and forced, with the one policy.

    A migration passes a condition of its own (a literal in the migration, never one of the
    constants above), so that a later change here never changes what an old migration did."""
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY {POLICY} ON {table} USING ({condition}) WITH CHECK ({condition})")


def change_condition(table: str, condition: str) -> None:
    """In a migration: the policy on `table` reads and writes under `condition` from now on."""
    op.execute(f"ALTER POLICY {POLICY} ON {table} USING ({condition}) WITH CHECK ({condition})")


def release(table: str) -> None:
    """In a migration's downgrade: `isolate` undone."""
    op.execute(f"DROP POLICY IF EXISTS {POLICY} ON {table}")
    op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
