"""Retrieval on tables: does the top chunk hold the asked cell together with its column header?

    python -m bench.tables_bench [--rows 90] [--questions 30] [--database-url URL]

One document per format (Word, PowerPoint, ODT, EPUB, HTML, markdown, PDF), each a fleet
register of `--rows` rows (vessel, home port, length, crew; made-up vessel names) between a
sentence that introduces it and one after it, made by tests/ingest/tables.py. Each is ingested
into a tenant of its own through `ingest_documents` (the service's parsers and chunker, the
in-process local embedding model) in a throwaway migrated database (bench/kit/database.py).
Questions ask one cell of `--questions` rows spread over the table: "What is the crew of vessel
X?", "... the home port ...", "... the length ...". For the top chunk of a search (hybrid, the
default, and vector), it counts:

- row: the chunk holds the answer on the vessel's line (the row is retrieved);
- with header: it also holds the header row (the four column names, in order, on one line,
  whatever separates them), so a reader can tell which number is the crew.

Prints a table per mode and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import time
from typing import Any

from app.embeddings.local import LocalEmbedder
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType, sniff_source_type
from app.ingest.versions import IngestResult
from app.resources import build_chunker
from app.retrieval import SearchMode, search, search_request
from bench.kit.database import BenchDatabase, bench_database, create_tenants
from bench.kit.report import log, print_table, write_json
from tests.ingest.tables import BUILDERS, HEADER, fleet, table_file

# column asked -> (its index in a row, the question)
ASKED = {
    "Crew": (3, "What is the crew of vessel {}?"),
    "Home port": (1, "What is the home port of vessel {}?"),
    "Length": (2, "What is the length of vessel {}?"),
}
_HEADER_LINE = re.compile(r"\W*".join(re.escape(name) for name in HEADER), re.IGNORECASE)


def judged(content: str, vessel: str, answer: str) -> tuple[bool, bool]:
    """(the answer on the vessel's line, and a header line in the same chunk)."""
    on_row = re.compile(rf"\b{re.escape(vessel)}\b.*\b{re.escape(answer)}\b")
    lines = content.split("\n")
    row = any(on_row.search(line) for line in lines)
    return row, row and any(_HEADER_LINE.search(line) for line in lines)


async def run_format(
    db: BenchDatabase, embedder: LocalEmbedder, kind: str, args: argparse.Namespace
) -> dict[str, Any]:
    rows = fleet(args.rows)
    name, data = table_file(kind, rows)
    tenant = f"tables-{kind}"
    await create_tenants(db.sessions, [tenant])
    source_type = sniff_source_type(data, filename=name, declared=None)
    content: str | bytes = data if source_type.file_only else data.decode()
    [outcome] = await ingest_documents(
        db.sessions,
        embedder,
        chunker=build_chunker(db.settings, embedder),
        tenant_id=tenant,
        documents=[DocumentInput(content=content, source_type=SourceType(source_type), title=name)],
    )
    if not isinstance(outcome, IngestResult):
        raise RuntimeError(f"{kind}: ingest failed: {outcome}")
    chunks = outcome.chunks
    step = max(1, args.rows // args.questions)
    asked = [rows[n] for n in range(0, args.rows, step)][: args.questions]
    result: dict[str, Any] = {"format": kind, "chunks": chunks, "questions": 0}
    for mode in (SearchMode.HYBRID, SearchMode.VECTOR):
        found = with_header = 0
        for row in asked:
            for column, question in ASKED.values():
                request = search_request(
                    db.settings, embedder.model_id, query=question.format(row[0]), mode=mode
                )
                request = dataclasses.replace(request, top_k=1, threshold=None)
                hits = (await search(db.sessions, embedder, tenant_id=tenant, request=request)).hits
                top = hits[0].content if hits else ""
                row_found, header_found = judged(top, row[0], row[column])
                found += row_found
                with_header += header_found
        result["questions"] = len(asked) * len(ASKED)
        result[mode.value] = {"row": found, "with_header": with_header}
    log(f"{kind}: {result}")
    return result


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    async with bench_database(superuser_url=args.database_url) as db:
        embedder = LocalEmbedder.load(db.settings)
        return [await run_format(db, embedder, kind, args) for kind in BUILDERS]


def report(results: list[dict[str, Any]]) -> None:
    for mode in (SearchMode.HYBRID, SearchMode.VECTOR):
        rows = [
            [
                r["format"],
                r["chunks"],
                r["questions"],
                f"{r[mode.value]['row'] / r['questions']:.0%}",
                f"{r[mode.value]['with_header'] / r['questions']:.0%}",
            ]
            for r in results
        ]
        print_table(
            f"top chunk of a {mode.value} search (bench/tables_bench.py)",
            ["format", "chunks", "questions", "row", "with header"],
            rows,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=90, help="rows of each table (90)")
    parser.add_argument("--questions", type=int, default=30, help="rows asked about (30)")
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    started = time.perf_counter()
    results = asyncio.run(run(args))
    report(results)
    path = write_json(
        "tables_bench",
        {"args": vars(args), "results": results, "seconds": time.perf_counter() - started},
    )
    print(f"JSON: {path}")  # noqa: T201


if __name__ == "__main__":
    main()
