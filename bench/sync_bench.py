"""Collection sync against re-ingesting: a collection of `--docs` documents whose source then
changed 1% of them and removed 1% (docs/SYNC.md, docs/BENCHMARKS.md "Collection sync").

    python -m bench.sync_bench [--docs 10000] [--embedder local|hash] [--database-url URL]

A throwaway embedded PostgreSQL 18 + pgvector (or --database-url, a superuser URL), the
service's operations in this process (app/operations: what the HTTP routes call). The
documents are NFCorpus and MEDLINE abstracts (past their 4,428, each again with a numbered
suffix, so every text is new). Three tenants load the same collection first (a sync of full
documents), then the source changes and each catches up its own way:

1. re-ingest: every document of the source again as a batch (the removed ones cannot be
   expressed: they stay);
2. sync, full: every document in full (unchanged ones are parsed and chunked, not embedded);
3. sync, references: the changed documents in full, the others as `{external_id, version}`.

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


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = source(args.docs)
    after, edited = changed_source(texts)
    async with bench_database(superuser_url=args.database_url) as db:
        tenants = ["reingest", "syncfull", "syncrefs"]
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
                seconds, embedded, _ = await measure(
                    counter,
                    syncing.sync(resources, sessions, tenant, SyncInput(COLLECTION, load)),
                )
                log(f"{tenant}: first load {seconds:.1f} s, {embedded} texts embedded")
            first = (seconds, embedded)

            new_full = [full(i, t) for i, t in after.items()]
            seconds, embedded, _ = await measure(
                counter, ingesting.ingest_batch(resources, sessions, "reingest", new_full)
            )
            rows.append(["re-ingest every document", f"{seconds:.1f}", embedded, 0])
            seconds, embedded, done = await measure(
                counter,
                syncing.sync(resources, sessions, "syncfull", SyncInput(COLLECTION, new_full)),
            )
            rows.append(
                ["sync, every document in full", f"{seconds:.1f}", embedded, len(done.deleted)]
            )
            mixed: list[Any] = [
                full(i, t) if i in edited else Reference(i, version(t)) for i, t in after.items()
            ]
            seconds, embedded, done = await measure(
                counter,
                syncing.sync(resources, sessions, "syncrefs", SyncInput(COLLECTION, mixed)),
            )
            rows.append(
                [
                    "sync, changed in full + references",
                    f"{seconds:.1f}",
                    embedded,
                    len(done.deleted),
                ]
            )
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
