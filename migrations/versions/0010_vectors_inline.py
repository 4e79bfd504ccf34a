"""Vectors stay in the row: `embedding` of chunks and documents gets storage MAIN.

pgvector's type is stored EXTERNAL by default: a value is moved out of line as soon as the
row passes TOAST's ~2 KB threshold. A 384-dimension vector is 1.5 KB, so with a chunk's text
beside it nearly every chunk's vector lived in the TOAST table, and every distance computed
from the heap (an exact scan of a small tenant or of a caller's few visible chunks, the
distances of the HNSW candidates, similar chunks, diversity, hybrid's cosine) paid a TOAST
index probe and a second heap read per row: an exact scan of 1,000 chunks took 3.5 ms, 1.3 ms
with the vectors in the row (docs/BENCHMARKS.md, "Vectors in the row"). With MAIN, TOAST
moves the text and the tsvector out first (BM25 reads postings, not tsvectors) and keeps the
vector in the row unless the row still cannot fit a page (vectors of about 2,000
dimensions or more).

Applies to rows written from now on: rows written before keep their out-of-line vectors
until rewritten (`VACUUM FULL chunks, documents`, or pg_repack without the exclusive lock;
docs/operations.md). A rewrite here would lock and rewrite the whole table during an upgrade.
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLES = ("chunks", "documents")


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE EXTERNAL")
