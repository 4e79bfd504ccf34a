"""Sync jobs: a collection sync too large for one request runs as a background job.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29

`ingest_jobs.sync` holds a sync job's request (the collection, the references, every external
id it names, its guards) while the job ingests the full entries as any job does, and then its
outcome (added, updated, unchanged, deleted, missing); `receipt_id` names the receipt written
with the deletions, at the job's end. Both null for a plain ingestion job.
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


# On Citus, this revision's DDL on a distributed table runs over one connection per node, so
# that another revision of the same run (0015's function) may still create or drop a function
# in the transaction.
SEQUENTIAL = (
    "DO $$ BEGIN IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN"
    " SET LOCAL citus.multi_shard_modify_mode TO 'sequential'; END IF; END $$"
)


def upgrade() -> None:
    op.execute(SEQUENTIAL)
    op.execute("ALTER TABLE ingest_jobs ADD COLUMN sync jsonb, ADD COLUMN receipt_id uuid")


def downgrade() -> None:
    op.execute(SEQUENTIAL)
    op.execute("ALTER TABLE ingest_jobs DROP COLUMN receipt_id, DROP COLUMN sync")
