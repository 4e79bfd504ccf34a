"""Job callbacks: where a job's end is announced, and how its delivery stands.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

The delivery's state lives on the job's own row (`ingest_jobs`, a tenant table under forced
row-level security, distributed by tenant on Citus): the URL, the state (`waiting` while the
job runs, `pending` until a receiver accepts, then `delivered`, or `failed` once the retry
window has passed), the attempts made, the last error and the next attempt's time. The queue
entries that make the attempts hold the job's id and tenant only, like the job's turns.
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

CALLBACK_STATUSES = "('waiting', 'pending', 'delivered', 'failed')"


def upgrade() -> None:
    op.execute(
        "ALTER TABLE ingest_jobs"
        " ADD COLUMN callback_url text,"
        " ADD COLUMN callback_status varchar(16),"
        " ADD COLUMN callback_attempts integer NOT NULL DEFAULT 0,"
        " ADD COLUMN callback_last_error text,"
        " ADD COLUMN callback_next_at timestamptz,"
        " ADD COLUMN callback_delivered_at timestamptz"
    )
    op.execute(
        "ALTER TABLE ingest_jobs ADD CONSTRAINT ck_ingest_jobs_callback_status"
        f" CHECK (callback_status in {CALLBACK_STATUSES})"
    )
    op.execute(
        "ALTER TABLE ingest_jobs ADD CONSTRAINT ck_ingest_jobs_callback_url_status"
        " CHECK ((callback_url is null) = (callback_status is null))"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE ingest_jobs"
        " DROP CONSTRAINT ck_ingest_jobs_callback_url_status,"
        " DROP CONSTRAINT ck_ingest_jobs_callback_status,"
        " DROP COLUMN callback_delivered_at,"
        " DROP COLUMN callback_next_at,"
        " DROP COLUMN callback_last_error,"
        " DROP COLUMN callback_attempts,"
        " DROP COLUMN callback_status,"
        " DROP COLUMN callback_url"
    )
