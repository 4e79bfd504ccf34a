"""Local embedding model: document throughput and query latency, alone and during an ingest.

    .venv/bin/python bench/embed_bench.py [--docs 2000] [--queries 200] [--batch-sizes 64]
                                          [--corpus PATH] [--json OUT]

Measures, with the configured local model (default the bundled all-MiniLM-L6-v2):
- load time (torch import included) and the tokens per document (truncated past the model's
  max_seq_length);
- raw batch throughput: texts/s embedding the first ``--docs`` NFCorpus documents
  ("title. text") in sub-batches of each ``--batch-sizes``, as ``embed_documents`` does;
- single-query latency P50/P95: raw ``encode`` on the calling thread, then through
  ``embed_query`` (the worker-thread hop included);
- query latency while a document ingest runs in the other lane (what a search sees during a
  large upload).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio

from app.embeddings.local import LocalEmbedder
from app.settings import EmbeddingProvider, Settings

DATA = Path(__file__).resolve().parents[2] / "shared/data/nfcorpus"


@dataclass(frozen=True, slots=True)
class Row:
    measure: str
    count: int
    value: str


def read_jsonl(path: Path, limit: int, fields: tuple[str, ...]) -> list[str]:
    texts: list[str] = []
    with path.open() as lines:
        for line in lines:
            if len(texts) >= limit:
                break
            record = json.loads(line)
            texts.append(". ".join(str(record[f]) for f in fields if record.get(f)))
    return texts


def percentiles(samples_ms: list[float]) -> str:
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return f"P50 {cuts[49]:.1f} ms, P95 {cuts[94]:.1f} ms, max {max(samples_ms):.1f} ms"


def token_row(embedder: LocalEmbedder, docs: list[str]) -> Row:
    from tokenizers import Tokenizer

    if embedder.tokenizer_file is None or embedder.max_input_tokens is None:
        return Row("tokens per document", len(docs), "tokenizer unknown")
    tokenizer = Tokenizer.from_file(str(embedder.tokenizer_file))
    tokenizer.no_truncation()
    counts = [len(encoding.ids) for encoding in tokenizer.encode_batch(docs)]
    truncated = sum(count > embedder.max_input_tokens for count in counts) / len(counts)
    value = (
        f"mean {statistics.fmean(counts):.0f}, median {statistics.median(counts):.0f}; "
        f"{truncated:.0%} over max_seq_length {embedder.max_input_tokens}"
    )
    return Row("tokens per document", len(docs), value)


def throughput_row(embedder: LocalEmbedder, docs: list[str], batch_size: int) -> Row:
    started = time.perf_counter()
    for start in range(0, len(docs), batch_size):
        embedder.encode_blocking(docs[start : start + batch_size])
    elapsed = time.perf_counter() - started
    value = f"{len(docs) / elapsed:.1f} texts/s ({elapsed:.1f} s)"
    return Row(f"documents, batch {batch_size}", len(docs), value)


def raw_query_row(embedder: LocalEmbedder, queries: list[str]) -> Row:
    samples = []
    for query in queries:
        started = time.perf_counter()
        embedder.encode_blocking([query])
        samples.append((time.perf_counter() - started) * 1000)
    return Row("query, raw encode", len(queries), percentiles(samples))


async def async_query_rows(
    embedder: LocalEmbedder, queries: list[str], docs: list[str]
) -> list[Row]:
    idle = [await timed_query(embedder, query) for query in queries]
    busy: list[float] = []
    ingest_done = anyio.Event()

    async def ingest() -> None:
        await embedder.embed_documents(docs)
        ingest_done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(ingest)
        await anyio.sleep(0.2)
        for query in queries:
            if ingest_done.is_set():
                break
            busy.append(await timed_query(embedder, query))
            await anyio.sleep(0.02)
    return [
        Row("query, embed_query (idle)", len(idle), percentiles(idle)),
        Row("query, embed_query during ingest", len(busy), percentiles(busy)),
    ]


async def timed_query(embedder: LocalEmbedder, query: str) -> float:
    started = time.perf_counter()
    await embedder.embed_query(query)
    return (time.perf_counter() - started) * 1000


def table(rows: list[Row]) -> str:
    width = max(len(row.measure) for row in rows)
    lines = [f"{'measure':<{width}}  {'n':>5}  result", "-" * (width + 60)]
    lines += [f"{row.measure:<{width}}  {row.count:>5}  {row.value}" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64])
    parser.add_argument("--corpus", type=Path, default=DATA)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    docs = read_jsonl(args.corpus / "corpus.jsonl", args.docs, ("title", "text"))
    queries = read_jsonl(args.corpus / "queries.jsonl", args.queries, ("text",))
    started = time.perf_counter()
    settings = Settings(_env_file=None, embedding_provider=EmbeddingProvider.LOCAL)
    embedder = LocalEmbedder.load(settings)
    rows = [Row(f"load {embedder.model_id}", 1, f"{time.perf_counter() - started:.1f} s")]
    rows.append(token_row(embedder, docs))
    rows += [throughput_row(embedder, docs, size) for size in args.batch_sizes]
    rows.append(raw_query_row(embedder, queries))
    rows += anyio.run(async_query_rows, embedder, queries, docs[:256])
    sys.stdout.write(f"local embeddings, {embedder.model_id}, NFCorpus\n\n{table(rows)}\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))


if __name__ == "__main__":
    main()
