"""Documents may be Word, PowerPoint, Excel, EPUB and OpenDocument text files.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

The check on `documents.source_type` is widened to the five new source types (`docx`,
`pptx`, `xlsx`, `epub`, `odt`; app/ingest/parsing/model.py). Dropped and added again in one
ALTER TABLE: the check of the existing rows is a scan of `documents` (not of `chunks`), and a
wider list cannot fail. 0001 created it as `ck_documents_ck_documents_source_type` (its name
went through the naming convention a second time); it comes back as
`ck_documents_source_type`, the name app/db/models.py gives it. A downgrade fails while
documents of the new types exist: delete them first.
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

OLD = ("text", "markdown", "html", "pdf")
NEW = (*OLD, "docx", "pptx", "xlsx", "epub", "odt")


NAMES = ("ck_documents_ck_documents_source_type", "ck_documents_source_type")


def _check(types: tuple[str, ...]) -> None:
    listed = ", ".join(f"'{name}'" for name in types)
    dropped = ", ".join(f"DROP CONSTRAINT IF EXISTS {name}" for name in NAMES)
    op.execute(
        f"ALTER TABLE documents {dropped},"
        f" ADD CONSTRAINT ck_documents_source_type CHECK (source_type in ({listed}))"
    )


def upgrade() -> None:
    _check(NEW)


def downgrade() -> None:
    _check(OLD)
