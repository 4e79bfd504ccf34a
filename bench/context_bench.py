"""Context assembly latency: 20 ranked chunks of ~500 characters -> context + citations + metrics.

Target (DESIGN.md): citation/context assembly under 5 ms at P95. Each run assembles a different
set of 20 chunks, cut from a real corpus (NFCorpus abstracts, when ../shared/data is present)
or from synthetic text, and the timing covers all of `build_context_with_citations`: truncation,
citation labels, token counting with the real MiniLM tokenizer, the final count and metrics.

    python -m bench.context_bench [--runs 2000] [--corpus PATH] [--json OUT]

Scenarios (the counter is long-lived in the service, like the one in Resources):
- corpus seen before: every run's words met in earlier runs (the steady state for a tenant);
- first pass over corpus: each chunk met for the first time, the cache filling as it goes
  (as many runs as the corpus holds sets of 20 chunks);
- word cache emptied before each run: every word of the 20 chunks is new (worst case);
- no word cache: the tokenizer encodes each block, then the context, whole (a plain counter);
- chars/4 estimate: no tokenizer at all;
each with the default budget (2,000 tokens, some chunks dropped) and one that holds all 20.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from uuid import UUID

from app.citations import (
    ApproxTokenCounter,
    TokenCounter,
    build_context_with_citations,
    load_token_counter,
)
from bench.kit.paths import NFCORPUS

CHUNKS_PER_RUN = 20
CHUNK_CHARS = 500
DEFAULT_CORPUS = NFCORPUS / "corpus.jsonl"
SOURCE_TYPES = ("pdf", "html", "markdown", "text")
VOCABULARY_TEXT = (
    "patients study risk cancer dietary intake associated cohort vitamin plasma levels "
    "randomized trial effect women men years mortality disease fiber protein consumption "
    "significantly results methods conclusions analysis higher lower compared increased"
)
VOCABULARY = VOCABULARY_TEXT.split()


@dataclass(frozen=True, slots=True)
class BenchChunk:
    chunk_id: UUID
    document_id: UUID
    title: str
    content: str
    similarity: float
    score: float
    source_type: str
    source_url: str | None
    page_number: int | None
    section: tuple[str, ...]
    chunk_index: int


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    max_tokens: int
    runs: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    chunks_used: float
    tokens: float


def corpus_texts(path: Path | None) -> Iterator[tuple[str, str]]:
    """(title, text) pairs: the corpus when there is one, else endless synthetic abstracts."""
    if path is not None and path.exists():
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                doc = json.loads(line)
                yield doc["_id"], f"{doc['title']} {doc['text']}".strip()
        return
    rng = random.Random(0)
    for n in range(10_000):
        yield f"Synthetic study {n}", " ".join(rng.choices(VOCABULARY, k=rng.randint(80, 400)))


def windows(text: str) -> Iterator[str]:
    """Consecutive pieces of about CHUNK_CHARS characters, cut between words."""
    piece: list[str] = []
    size = 0
    for word in text.split():
        piece.append(word)
        size += len(word) + 1
        if size >= CHUNK_CHARS:
            yield " ".join(piece)
            piece, size = [], 0
    if size > CHUNK_CHARS // 2:
        yield " ".join(piece)


def make_chunks(path: Path | None, *, needed: int) -> list[BenchChunk]:
    rng = random.Random(1)
    chunks: list[BenchChunk] = []
    for doc_number, (title, text) in enumerate(corpus_texts(path)):
        kind = SOURCE_TYPES[doc_number % len(SOURCE_TYPES)]
        url = f"https://example.org/{title}" if kind == "html" else None
        for index, content in enumerate(windows(text)):
            chunks.append(
                BenchChunk(
                    chunk_id=UUID(int=len(chunks) + 1),
                    document_id=UUID(int=1_000_000 + doc_number),
                    title=title,
                    content=content,
                    similarity=rng.uniform(0.3, 0.9),
                    score=0.0,
                    source_type=kind,
                    source_url=url,
                    page_number=index + 1 if kind == "pdf" else None,
                    section=("Abstract", f"Part {index + 1}"),
                    chunk_index=index,
                )
            )
        if len(chunks) >= needed:
            break
    return chunks


def request_sets(chunks: list[BenchChunk], runs: int) -> list[list[BenchChunk]]:
    """One ranked list per run: 20 chunks, two or three of them from one document."""
    rng = random.Random(2)
    sets = []
    for run in range(runs):
        start = (run * CHUNKS_PER_RUN) % (len(chunks) - CHUNKS_PER_RUN)
        picked = chunks[start : start + CHUNKS_PER_RUN]
        sets.append(sorted(picked, key=lambda c: (-c.similarity, rng.random())))
    return sets


def measure(
    name: str,
    counter: TokenCounter,
    sets: list[list[BenchChunk]],
    *,
    max_tokens: int,
    warm_up: list[list[BenchChunk]],
    before_run: Callable[[], None] = lambda: None,
) -> Row:
    for ranked in warm_up:
        build_context_with_citations(ranked, counter, max_tokens=max_tokens)
    timings, used, tokens = [], [], []
    gc.collect()
    for ranked in sets:
        before_run()
        start = time.perf_counter_ns()
        result = build_context_with_citations(ranked, counter, max_tokens=max_tokens)
        timings.append((time.perf_counter_ns() - start) / 1e6)
        used.append(len(result.used))
        tokens.append(result.metrics.total_tokens)
    cuts = statistics.quantiles(timings, n=100, method="inclusive")
    return Row(
        scenario=name,
        max_tokens=max_tokens,
        runs=len(sets),
        p50_ms=cuts[49],
        p95_ms=cuts[94],
        p99_ms=cuts[98],
        max_ms=max(timings),
        chunks_used=statistics.fmean(used),
        tokens=statistics.fmean(tokens),
    )


def run(runs: int, corpus: Path | None) -> list[Row]:
    chunks = make_chunks(corpus, needed=runs * CHUNKS_PER_RUN)
    sets = request_sets(chunks, runs)
    first_pass = sets[: len(chunks) // CHUNKS_PER_RUN]  # every chunk new to the counter
    # A few requests on unrelated text first, so no scenario pays for first calls.
    other = request_sets(make_chunks(None, needed=50 * CHUNKS_PER_RUN), 50)
    rows = []
    for budget in (2000, 8000):
        fresh, seen, cleared = load_token_counter(), load_token_counter(), load_token_counter()
        whole = load_token_counter(word_cache_size=0)
        rows += [
            measure("tokenizer, corpus seen before", seen, sets, max_tokens=budget, warm_up=sets),
            measure(
                "tokenizer, first pass over corpus",
                fresh,
                first_pass,
                max_tokens=budget,
                warm_up=other,
            ),
            measure(
                "tokenizer, word cache emptied",
                cleared,
                sets,
                max_tokens=budget,
                warm_up=other,
                before_run=cleared.clear_cache,
            ),
            measure("tokenizer, no word cache", whole, sets, max_tokens=budget, warm_up=other),
            measure(
                "chars/4 estimate", ApproxTokenCounter(), sets, max_tokens=budget, warm_up=other
            ),
        ]
    return rows


def table(rows: list[Row]) -> str:
    head = f"{'scenario':<34} {'budget':>6} {'runs':>5} {'P50 ms':>7} {'P95 ms':>7} "
    head += f"{'P99 ms':>7} {'max ms':>7} {'chunks':>6} {'tokens':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.scenario:<34} {r.max_tokens:>6} {r.runs:>5} {r.p50_ms:>7.2f} {r.p95_ms:>7.2f} "
            f"{r.p99_ms:>7.2f} {r.max_ms:>7.2f} {r.chunks_used:>6.1f} {r.tokens:>6.0f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    corpus = args.corpus if args.corpus.exists() else None
    rows = run(args.runs, corpus)
    source = corpus or "synthetic text"
    sys.stdout.write(f"context assembly, {CHUNKS_PER_RUN} chunks of ~{CHUNK_CHARS} chars ")
    sys.stdout.write(f"from {source}; target P95 < 5 ms\n\n{table(rows)}\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
