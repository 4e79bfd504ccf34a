"""Document versions and receipts: what a source says a document's revision is, and the
signed record of what a sync or a deletion changed.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29

`documents.version` is the caller's opaque revision of a document (an etag, a modification
time, a commit), stored as given and compared by a collection sync (app/ingest/sync.py).

`receipts` holds one row per sync, document deletion and tenant deletion: what was added,
updated and deleted, with content hashes (`body`, the JSON that is signed) and its Standard
Webhooks signature when the service has a webhook secret. A tenant table under forced
row-level security, distributed by tenant on Citus, with no key to the tenant registry: the
receipt of a tenant's deletion outlives the tenant.
"""

from alembic import context, op

from app.db.policies import isolate, release

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

OWN = "tenant_id = nullif(current_setting('app.tenant_id', true), '')"
# On Citus, this revision's DDL on distributed tables runs over one connection per node, so
# that a later revision of the same run (0015's function, going down) may still create or drop
# a function in the transaction.
SEQUENTIAL = (
    "DO $$ BEGIN IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN"
    " SET LOCAL citus.multi_shard_modify_mode TO 'sequential'; END IF; END $$"
)


def upgrade() -> None:
    op.execute(SEQUENTIAL)
    op.execute("ALTER TABLE documents ADD COLUMN version text")
    op.execute(
        "ALTER TABLE documents ADD CONSTRAINT ck_documents_version_length"
        " CHECK (char_length(version) <= 256)"
    )
    op.execute(
        "CREATE TABLE receipts ("
        " tenant_id varchar(64) NOT NULL,"
        " id uuid NOT NULL,"
        " kind varchar(16) NOT NULL,"
        " collection text,"
        " created_at timestamptz NOT NULL DEFAULT now(),"
        " body jsonb NOT NULL,"
        " signature text,"
        " PRIMARY KEY (tenant_id, id),"
        " CONSTRAINT ck_receipts_kind CHECK (kind in ('sync', 'delete', 'tenant_delete'))"
        ")"
    )
    op.execute("CREATE INDEX ix_receipts_tenant_id_created_at ON receipts (tenant_id, created_at)")
    isolate("receipts", OWN)
    app_role = context.config.attributes.get("app_role", "rag_app")
    op.execute(f"GRANT SELECT, INSERT ON receipts TO {app_role}")  # a receipt is never changed


def downgrade() -> None:
    op.execute(SEQUENTIAL)
    release("receipts")
    op.execute("DROP TABLE receipts")
    op.execute("ALTER TABLE documents DROP CONSTRAINT ck_documents_version_length")
    op.execute("ALTER TABLE documents DROP COLUMN version")
