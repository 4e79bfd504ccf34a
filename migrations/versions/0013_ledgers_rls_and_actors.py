"""Row-level security on the audit log and the usage counters; who acted, unambiguously.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

- `audit_log` and `tenant_usage` name a tenant in every row (the audit log's cluster-wide
  entries name none): like every table with a `tenant_id`, they get row-level security,
  enabled and forced. A tenant transaction sees and writes its own tenant's rows only. Reading
  or writing across tenants (the admin API's audit log, the usage flush of every tenant's
  counters, a registry action's audit entry) needs `app.ledgers = 'on'`, which the service sets
  in the transactions that do so (`ledger_transaction`, app/db/tenancy.py) and which opens no
  other table: documents and chunks ignore it.
- An audit entry says what kind of actor acted: `token` (a bearer token: its `sub`, its
  tenant and the id of the key that verified it, `actor_key_id`) or `operator` (someone on the
  service's machine, through the command line: `cli:<user>`). Before, a token whose `sub` was
  `cli:root` read as a command-line action. The entries written so far: a token's always had
  its tenant, a command line's never, which tells them apart.
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TABLES = ("audit_log", "tenant_usage")
OWN_OR_LEDGERS = (
    "tenant_id = nullif(current_setting('app.tenant_id', true), '')"
    " OR current_setting('app.ledgers', true) = 'on'"
)


def upgrade() -> None:
    op.execute(
        "ALTER TABLE audit_log"
        " ADD COLUMN actor_kind varchar(16) NOT NULL DEFAULT 'token',"
        " ADD COLUMN actor_key_id text"
    )
    op.execute("UPDATE audit_log SET actor_kind = 'operator' WHERE actor_tenant_id IS NULL")
    op.execute("ALTER TABLE audit_log ALTER COLUMN actor_kind DROP DEFAULT")
    op.execute(
        "ALTER TABLE audit_log ADD CONSTRAINT ck_audit_log_actor_kind"
        " CHECK (actor_kind in ('token', 'operator'))"
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table}"
            f" USING ({OWN_OR_LEDGERS}) WITH CHECK ({OWN_OR_LEDGERS})"
        )


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute(
        "ALTER TABLE audit_log DROP CONSTRAINT ck_audit_log_actor_kind,"
        " DROP COLUMN actor_key_id, DROP COLUMN actor_kind"
    )
