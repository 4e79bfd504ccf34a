"""Admin: an audit log of admin actions, per-tenant usage counters, tenant deletion.

Both tables are registry-side, like `tenants`: no tenant content, no RLS. The runtime role may
only append to the audit log (no UPDATE, no DELETE: the record of who changed what cannot be
rewritten by the service), and upserts usage counters per tenant and 5-minute bucket. It may
now DELETE tenants: the foreign keys cascade to the tenant's collections, documents and chunks
(referential actions run as the tables' owner, past row-level security).

Revision ID: 0005
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql as pg

revision = "0005"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    app_role = context.config.attributes.get("app_role", "rag_app")
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("actor_subject", sa.Text(), nullable=False),
        sa.Column("actor_tenant_id", sa.String(64), nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=True),
        sa.Column("before", pg.JSONB(), nullable=True),
        sa.Column("after", pg.JSONB(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_tenant_id_id", "audit_log", ["tenant_id", "id"])
    op.create_index("ix_audit_log_action_id", "audit_log", ["action", "id"])
    op.create_table(
        "tenant_usage",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        sa.Column("searches", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("ingests", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("rate_limited", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "bucket", name="pk_tenant_usage"),
    )
    op.create_index("ix_tenant_usage_bucket", "tenant_usage", ["bucket"])
    op.execute(f"GRANT SELECT, INSERT ON audit_log TO {app_role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_usage TO {app_role}")
    op.execute(f"GRANT DELETE ON tenants TO {app_role}")


def downgrade() -> None:
    app_role = context.config.attributes.get("app_role", "rag_app")
    op.execute(f"REVOKE DELETE ON tenants FROM {app_role}")
    op.drop_table("tenant_usage")
    op.drop_table("audit_log")
