"""Collection sync against re-ingesting: a collection of `--docs` documents whose source then
changed 1% of them and removed 1% (docs/SYNC.md, docs/BENCHMARKS.md "Collection sync").

    python -m bench.sync_bench [--docs 10000] [--embedder local|hash] [--database-url URL]

A throwaway embedded PostgreSQL 18 + pgvector (or --database-url, a superuser URL), the
service's operations in this process (app/operations: what the HTTP routes call). The
documents are NFCorpus and MEDLINE abstracts (past their 4,428, each again with a numbered
suffix, so every text is new). Three tenants load the same collection first (a sync of full
documents), then the source changes and each catches up its own way:

1. re-ingest: every document of the source again, in batches of 100 (the removed ones cannot
   be expressed: they stay);
2. one sync: the changed documents in full, the others as `{external_id, version}`;
3. as `rag sync` does: a dry sync by reference finds the changed documents, they are sent in
   batches, then a sync by reference deletes the removed ones.
(A sync with every document in full is one request: its documents share the synchronous
bound on chunks, RAG_SYNC_INGEST_MAX_CHUNKS, which 10,000 abstracts pass.)

For each: seconds, texts embedded (a counter in front of the embedder) and documents deleted.
`--embedder hash` uses the tests' word-hash embedder (no model: the time is the service's own
work); `local` the bundled all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from app.auth import TokenVerifier
from app.embeddings import Embedder, WrappedEmbedder
from app.errors import AppError
from app.ingest.entries import Reference
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.inputs.sync import SyncInput
from app.operations import ingest as ingesting
from app.operations import sync as syncing
from app.permissions import EVERY_DOCUMENT
from app.resources import Resources, open_resources
from bench.kit.corpus import document_text, read_corpus
from bench.kit.database import bench_database, create_tenants
from bench.kit.paths import DATA
from bench.kit.report import log, print_table, write_json
from tests.fakes import WordHashEmbedder

COLLECTION = "kb"


class Counting(WrappedEmbedder):
    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.texts = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return await self.inner.embed_documents(texts)

    async def aclose(self) -> None:
        return None  # the resources' own embedder is closed with them


def source(count: int) -> dict[str, str]:
    """external id -> text, `count` of them."""
    abstracts = [document_text(d) for d in read_corpus()] + [
        document_text(d) for d in read_corpus(root=DATA / "medline")
    ]
    texts = {}
    for index in range(count):
        text = abstracts[index % len(abstracts)]
        if index >= len(abstracts):
            text = f"{text} (reprint {index // len(abstracts)})"
        texts[f"doc-{index:05d}"] = text
    return texts


def version(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def full(external_id: str, text: str) -> DocumentInput:
    return DocumentInput(
        content=text,
        source_type=SourceType.TEXT,
        external_id=external_id,
        collection=COLLECTION,
        version=version(text),
    )


def changed_source(texts: dict[str, str]) -> tuple[dict[str, str], set[str]]:
    """1% of the documents edited, 1% removed; the new source and the edited ids."""
    ids = sorted(texts)
    step = 100
    edited = set(ids[::step])
    removed = set(ids[1::step])
    after = {
        i: (f"{t} Revised: the dose was corrected." if i in edited else t)
        for i, t in texts.items()
        if i not in removed
    }
    return after, edited


async def measure(counter: Counting, work: Any) -> tuple[float, int, Any]:
    before = counter.texts
    start = time.perf_counter()
    result = await work
    return time.perf_counter() - start, counter.texts - before, result


async def in_batches(resources: Resources, tenant: str, documents: list[DocumentInput]) -> None:
    """As a client sends a collection: batches of the most documents one request may hold."""
    size = resources.settings.batch_max_documents
    for start in range(0, len(documents), size):
        outcomes = await ingesting.ingest_batch(
            resources, resources.sessions, tenant, documents[start : start + size]
        )
        failed = [o for o in outcomes if isinstance(o, AppError)]
        assert not failed, failed[:3]


async def as_rag_sync(resources: Resources, tenant: str, source: dict[str, str]) -> int:
    """`rag sync`'s three steps: which documents are missing (a dry sync by reference), those
    sent in batches, then the sync by reference (the deletions); how many were deleted."""
    references: list[Any] = [Reference(i, version(t)) for i, t in source.items()]
    asked = SyncInput(COLLECTION, references, dry_run=True)
    planned = await syncing.sync(resources, resources.sessions, tenant, asked)
    missing = set(planned.missing)
    await in_batches(resources, tenant, [full(i, t) for i, t in source.items() if i in missing])
    done = await syncing.sync(
        resources, resources.sessions, tenant, SyncInput(COLLECTION, references)
    )
    return len(done.deleted)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = source(args.docs)
    after, edited = changed_source(texts)
    async with bench_database(superuser_url=args.database_url) as db:
        tenants = ["reingest", "syncfull", "syncrefs"]  # the three ways to catch up
        await create_tenants(db.sessions, tenants)
        embedder = WordHashEmbedder(384) if args.embedder == "hash" else None
        async with open_resources(
            db.settings, verifier=TokenVerifier([]), embedder=embedder
        ) as opened:
            counter = Counting(opened.embedder)
            resources: Resources = replace(opened, embedder=counter).reading_as_caller(
                EVERY_DOCUMENT
            )
            sessions = resources.sessions
            rows: list[list[object]] = []
            load = [full(i, t) for i, t in texts.items()]
            for tenant in tenants:
                seconds, embedded, _ = await measure(counter, in_batches(resources, tenant, load))
                log(f"{tenant}: first load {seconds:.1f} s, {embedded} texts embedded")
            first = (seconds, embedded)

            new_full = [full(i, t) for i, t in after.items()]
            seconds, embedded, _ = await measure(
                counter, in_batches(resources, "reingest", new_full)
            )
            rows.append(
                ["re-ingest every document (batches of 100)", f"{seconds:.1f}", embedded, 0]
            )
            mixed: list[Any] = [
                full(i, t) if i in edited else Reference(i, version(t)) for i, t in after.items()
            ]
            seconds, embedded, done = await measure(
                counter,
                syncing.sync(resources, sessions, "syncfull", SyncInput(COLLECTION, mixed)),
            )
            assert not done.failed, done.failed[:3]
            rows.append(
                ["one sync: changed in full, the rest by reference", f"{seconds:.1f}", embedded,
                 len(done.deleted)]
            )  # fmt: skip
            seconds, embedded, deleted = await measure(
                counter, as_rag_sync(resources, "syncrefs", after)
            )
            rows.append(
                ["as rag sync: references, changed sent in batches, references",
                 f"{seconds:.1f}", embedded, deleted]
            )  # fmt: skip
    header = ["after 1% changed and 1% removed", "seconds", "texts embedded", "deleted"]
    print_table(
        f"Collection sync, {args.docs} documents ({args.embedder} embedder); first load "
        f"{first[0]:.1f} s, {first[1]} texts embedded",
        header,
        rows,
    )
    return {"docs": args.docs, "embedder": args.embedder, "first_load": first, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--embedder", choices=["local", "hash"], default="local")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    write_json("sync_bench", asyncio.run(run(args)))


if __name__ == "__main__":
    main()
