"""Ingestion jobs: `ingest_jobs` and their pending `ingest_job_inputs` (tenant rows under
forced RLS), and procrastinate's queue schema (its tables hold job ids only, no tenant data).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.util import await_only

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TENANT_OWNED = ("ingest_jobs", "ingest_job_inputs")
JOB_STATUSES = "('queued', 'running', 'succeeded', 'failed', 'cancelled', 'partial')"


def upgrade() -> None:
    app_role = context.config.attributes.get("app_role", "rag_app")
    op.create_table(
        "ingest_jobs",
        sa.Column("id", pg.UUID(), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), server_default="queued", nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("documents_total", sa.Integer(), nullable=False),
        sa.Column("documents_done", sa.Integer(), server_default="0", nullable=False),
        sa.Column("documents_failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("chunks_done", sa.Integer(), server_default="0", nullable=False),
        sa.Column("chunks_in_progress", sa.Integer(), server_default="0", nullable=False),
        sa.Column("chunks_in_progress_total", sa.Integer(), server_default="0", nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=False),
        sa.Column("bytes_pending", sa.BigInteger(), nullable=False),
        sa.Column("results", pg.JSONB(), server_default="[]", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("turns", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name="pk_ingest_jobs"),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            ondelete="CASCADE",
            name="fk_ingest_jobs_tenant_id_tenants",
        ),
        sa.UniqueConstraint("tenant_id", "id", name="uq_ingest_jobs_tenant_id_id"),
        sa.CheckConstraint(f"status in {JOB_STATUSES}", name="ck_ingest_jobs_status"),
    )
    op.create_index("ix_ingest_jobs_tenant_id_status", "ingest_jobs", ["tenant_id", "status"])
    op.create_index(
        "ix_ingest_jobs_tenant_id_created_at", "ingest_jobs", ["tenant_id", "created_at"]
    )
    op.create_table(
        "ingest_job_inputs",
        sa.Column("id", pg.UUID(), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("job_id", pg.UUID(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("is_text", sa.Boolean(), nullable=False),
        sa.Column("source_type", sa.String(16), nullable=False),
        sa.Column("fields", pg.JSONB(), server_default="{}", nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_ingest_job_inputs"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "job_id"],
            ["ingest_jobs.tenant_id", "ingest_jobs.id"],
            ondelete="CASCADE",
            name="fk_ingest_job_inputs_tenant_id_ingest_jobs",
        ),
        sa.UniqueConstraint("job_id", "position", name="uq_ingest_job_inputs_job_id_position"),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(TENANT_OWNED)} TO {app_role}")
    for table in TENANT_OWNED:
        _isolate(table)
    # Imported here: alembic loads every revision on each `rag` command (the upgrade to head
    # that finds nothing to do), and procrastinate, with psycopg, takes ~0.1 s of CPU.
    from procrastinate.schema import SchemaManager

    _run_script(SchemaManager.get_schema())
    op.execute(
        f"""
        DO $$ DECLARE t text; BEGIN
          FOR t IN SELECT tablename FROM pg_tables
                   WHERE schemaname = 'public' AND tablename LIKE 'procrastinate\\_%' LOOP
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO {app_role}', t);
          END LOOP;
          FOR t IN SELECT sequencename FROM pg_sequences
                   WHERE schemaname = 'public' AND sequencename LIKE 'procrastinate\\_%' LOOP
            EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %I TO {app_role}', t);
          END LOOP;
        END $$
        """
    )


def _run_script(script: str) -> None:
    """A multi-statement script (functions with $$ bodies) through asyncpg's simple-query
    protocol: a prepared statement holds one command only."""
    raw = op.get_bind().connection.driver_connection
    await_only(raw.execute(script))


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
    op.execute(
        """
        DO $$ DECLARE r record; BEGIN
          FOR r IN SELECT tablename FROM pg_tables
                   WHERE schemaname = 'public' AND tablename LIKE 'procrastinate\\_%' LOOP
            EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', r.tablename);
          END LOOP;
          FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p
                   JOIN pg_namespace n ON n.oid = p.pronamespace
                   WHERE n.nspname = 'public' AND p.proname LIKE 'procrastinate\\_%' LOOP
            EXECUTE format('DROP FUNCTION IF EXISTS %s CASCADE', r.f);
          END LOOP;
          FOR r IN SELECT typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'public' AND typname LIKE 'procrastinate\\_%'
                     AND t.typtype IN ('e', 'c') LOOP
            EXECUTE format('DROP TYPE IF EXISTS %I CASCADE', r.typname);
          END LOOP;
        END $$
        """
    )
    for table in reversed(TENANT_OWNED):
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
    op.drop_table("ingest_job_inputs")
    op.drop_table("ingest_jobs")
