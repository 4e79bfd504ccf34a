"""Local embedding model per runtime: throughput, query latency, agreement and nDCG@10, in one run.

    python -m bench.embed_bench [--runtimes torch onnx onnx-int8] [--docs 512]
        [--queries 60] [--rounds 3] [--batch-sizes 64] [--ndcg-docs N] [--skip-ndcg]
        [--corpus PATH] [--json OUT]

Every runtime of ``RAG_EMBEDDING_RUNTIME`` loads the configured local model (default the
bundled all-MiniLM-L6-v2; ONNX graphs exported into RAG_CACHE_DIR first if need be, the load
time then includes the export). Then, in ``--rounds`` rounds in which the runtimes take turns
(so a shared machine's load falls on all of them alike), each runtime:

- embeds the ``--docs`` first NFCorpus documents ("title. text", truncated at the model's
  max_seq_length) longest first in sub-batches of each ``--batch-sizes``, as
  ``embed_documents`` does: texts/s;
- embeds one query at a time on the calling thread (raw encode): latency per query.

Reported per runtime: medians over the rounds of texts/s, P50/P95 of every query latency,
their ratio to the first runtime, the cosine of its document vectors to the first's (min and
mean), then ``embed_query`` latency idle and while a document
ingest runs in the other lane, and nDCG@10 of exact dense search (numpy, cosine) over every
NFCorpus document embedded whole, for the judged test queries (``--skip-ndcg`` to leave out).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt

from app.embeddings.local import LocalEmbedder
from app.evaluation import read_beir, score_run
from app.settings import EmbeddingProvider, EmbeddingRuntime, Settings
from bench.kit.paths import NFCORPUS
from bench.kit.report import log
from bench.kit.stats import quantile

DATA = NFCORPUS


@dataclass(slots=True)
class Result:
    runtime: str
    model_id: str = ""
    load_seconds: float = 0.0
    texts_per_second: dict[int, list[float]] = field(default_factory=dict)
    query_ms: list[float] = field(default_factory=list)
    cosine_min: float = 1.0
    cosine_mean: float = 1.0
    idle_ms: list[float] = field(default_factory=list)
    busy_ms: list[float] = field(default_factory=list)
    ndcg_at_10: float | None = None


def read_jsonl(path: Path, limit: int, fields: tuple[str, ...]) -> list[str]:
    texts: list[str] = []
    with path.open() as lines:
        for line in lines:
            if len(texts) >= limit:
                break
            record = json.loads(line)
            texts.append(". ".join(str(record[f]) for f in fields if record.get(f)))
    return texts


def embed_sorted(embedder: LocalEmbedder, docs: list[str], batch_size: int) -> npt.NDArray[Any]:
    """Longest first in sub-batches, as embed_documents does; vectors in the input order."""
    order = sorted(range(len(docs)), key=lambda i: -len(docs[i]))
    vectors = np.zeros((len(docs), embedder.dimensions), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        picked = order[start : start + batch_size]
        vectors[picked] = embedder.encode_blocking([docs[i] for i in picked])
    return vectors


def measure_round(
    embedder: LocalEmbedder,
    result: Result,
    docs: list[str],
    queries: list[str],
    batch_sizes: list[int],
) -> npt.NDArray[Any]:
    vectors = np.zeros((0, embedder.dimensions))
    for size in batch_sizes:
        started = time.perf_counter()
        vectors = embed_sorted(embedder, docs, size)
        rate = len(docs) / (time.perf_counter() - started)
        result.texts_per_second.setdefault(size, []).append(rate)
    for query in queries:
        started = time.perf_counter()
        embedder.encode_blocking([query])
        result.query_ms.append((time.perf_counter() - started) * 1000)
    return vectors


async def lane_latency(
    embedder: LocalEmbedder, queries: list[str], docs: list[str]
) -> tuple[list[float], list[float]]:
    """embed_query idle, then while embed_documents runs in the other lane."""
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
    return idle, busy


async def timed_query(embedder: LocalEmbedder, query: str) -> float:
    started = time.perf_counter()
    await embedder.embed_query(query)
    return (time.perf_counter() - started) * 1000


def ndcg(embedder: LocalEmbedder, corpus: Path, limit: int | None) -> float:
    """nDCG@10 of exact cosine search over whole documents, NFCorpus test queries."""
    beir = read_beir(corpus)
    documents = (beir.corpus or [])[:limit] if limit else (beir.corpus or [])
    texts = [f"{d.title}. {d.text}" if d.title else d.text for d in documents]
    matrix = embed_sorted(embedder, texts, embedder.batch_size)
    query_ids = list(beir.queries)
    queries = embed_sorted(embedder, [beir.queries[q] for q in query_ids], 64)
    top = np.argsort(-(queries @ matrix.T), axis=1)[:, :10]
    run = {q: [documents[j].doc_id for j in row] for q, row in zip(query_ids, top, strict=True)}
    return score_run(run, beir.qrels).ndcg_at_10


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def summary(results: list[Result], batch_sizes: list[int]) -> str:
    base = results[0]
    header = ["runtime", "model id", "load s"]
    header += [f"texts/s b{size}" for size in batch_sizes]
    header += ["query P50 ms", "query P95 ms", "embed_query P95 idle / during ingest ms"]
    header += [f"cosine to {base.runtime} min / mean", "nDCG@10"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for r in results:
        cells = [r.runtime, f"`{r.model_id}`", f"{r.load_seconds:.1f}"]
        for size in batch_sizes:
            rate = statistics.median(r.texts_per_second[size])
            ratio = rate / statistics.median(base.texts_per_second[size])
            cells.append(f"{rate:.1f} ({ratio:.2f}x)")
        for q in (50, 95):
            value = quantile(r.query_ms, q / 100)
            cells.append(f"{value:.1f} ({value / quantile(base.query_ms, q / 100):.2f}x)")
        cells.append(f"{quantile(r.idle_ms, 0.95):.1f} / {quantile(r.busy_ms, 0.95):.1f}")
        cells.append(f"{r.cosine_min:.5f} / {r.cosine_mean:.5f}")
        cells.append("-" if r.ndcg_at_10 is None else f"{r.ndcg_at_10:.4f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--runtimes",
        nargs="+",
        default=[
            r.value
            for r in (EmbeddingRuntime.TORCH, EmbeddingRuntime.ONNX, EmbeddingRuntime.ONNX_INT8)
        ],
        choices=[r.value for r in EmbeddingRuntime],
        help="the first is the base of the ratios and of the cosine column",
    )
    parser.add_argument("--docs", type=int, default=512)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64])
    parser.add_argument("--ndcg-docs", type=int, help="only the first N documents (default all)")
    parser.add_argument("--skip-ndcg", action="store_true")
    parser.add_argument("--corpus", type=Path, default=DATA)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    docs = read_jsonl(args.corpus / "corpus.jsonl", args.docs, ("title", "text"))
    queries = read_jsonl(args.corpus / "queries.jsonl", args.queries * args.rounds, ("text",))
    embedders: list[LocalEmbedder] = []
    results: list[Result] = []
    for runtime in args.runtimes:
        started = time.perf_counter()
        settings = Settings(
            _env_file=None,
            embedding_provider=EmbeddingProvider.LOCAL,
            embedding_runtime=EmbeddingRuntime(runtime),
        )
        embedder = LocalEmbedder.load(settings)
        embedders.append(embedder)
        results.append(Result(runtime, embedder.model_id, time.perf_counter() - started))
        log(f"loaded {runtime} in {results[-1].load_seconds:.1f} s")
    reference: npt.NDArray[Any] | None = None
    for round_number in range(args.rounds):
        batch = queries[round_number * args.queries : (round_number + 1) * args.queries]
        for embedder, result in zip(embedders, results, strict=True):
            vectors = measure_round(embedder, result, docs, batch, args.batch_sizes)
            if reference is None:
                reference = vectors
            cosines = np.sum(vectors * reference, axis=1)
            result.cosine_min, result.cosine_mean = float(cosines.min()), float(cosines.mean())
            gc.collect()
        log(f"round {round_number + 1}/{args.rounds} done")
    for embedder, result in zip(embedders, results, strict=True):
        result.idle_ms, result.busy_ms = anyio.run(
            lane_latency, embedder, queries[: args.queries], docs[:256]
        )
    log(summary(results, args.batch_sizes))  # the timings, before the long nDCG passes
    # Fastest first: a run cut short during the slow passes still has the quick ones.
    by_speed = sorted(
        zip(embedders, results, strict=True),
        key=lambda pair: -statistics.median(pair[1].texts_per_second[args.batch_sizes[0]]),
    )
    for embedder, result in by_speed:
        if not args.skip_ndcg:
            result.ndcg_at_10 = ndcg(embedder, args.corpus, args.ndcg_docs)
            log(f"nDCG@10 {result.runtime}: {result.ndcg_at_10:.4f}")
    title = f"local embeddings, {results[0].model_id}, NFCorpus, {args.docs} documents"
    title += f", {args.rounds} rounds; peak RSS of the process {peak_rss_mb():.0f} MB"
    sys.stdout.write(f"{title}\n\n{summary(results, args.batch_sizes)}\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
