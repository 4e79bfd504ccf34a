"""The parts of a search measured alone, one at a time, in this process: the local model's
query embedding, and the service's search code with the vector given (its Python here, its
SQL in PostgreSQL's processes): each mode's searches in a block, then the modes in turns,
request by request, for the Python of the direct path (drift on a shared machine cancels out
between the modes)."""

from __future__ import annotations

import multiprocessing
import statistics
import time
from typing import Any

from app.embeddings.local import LocalEmbedder
from app.inputs.vocabulary import SearchMode
from app.retrieval import SearchFilters, search, search_request
from app.retrieval.bm25 import EXPLICIT_OPERATORS
from app.settings import Settings
from bench.kit.database import BenchDatabase
from bench.kit.stubs import StubEmbedder
from bench.saturation.cpu import ProcessTree, postmaster_pid

MODES = (SearchMode.VECTOR, SearchMode.KEYWORD, SearchMode.HYBRID)
# the direct path, unfiltered and filtered by collection, and the session's (a source-type
# filter); the bench's one collection and one source type keep every chunk
WAYS = {
    "direct": None,
    "collection filter": SearchFilters(collections=["default"]),
    "source-type filter": SearchFilters(source_types=["text"]),
}


async def measure(
    db: BenchDatabase, tenant_id: str, texts: list[str], *, threads: int = 0
) -> dict[str, Any]:
    """CPU ms per query (all of this process's threads) and the wall-clock median, of each
    part: `embedding` (one text per call, as a search embeds; then in batches, per text), then
    per mode `python <mode>`
    (the search code around the SQL, this process, every text) and `sql <mode>` (PostgreSQL's
    processes); then `python <mode>, <way>, in turns` (medians per search, the modes taking
    turns, the texts without web-search operators: the direct path, the same filtered by their
    collection, still direct, and by their source type: the session's)."""
    measured: dict[str, Any] = {}
    vectors: dict[str, list[float]] = {}
    # the ONNX threads the server's workers have (RAG_EMBEDDING_THREADS; 0: the cores)
    settings = db.settings.model_copy(update={"embedding_threads": threads})
    local = LocalEmbedder.load(settings)
    local.encode_blocking(texts[:5])  # the first calls allocate
    walls, began = [], time.process_time()
    for text in texts:
        start = time.perf_counter()
        [vectors[text]] = local.encode_blocking([local.query_prefix + text])
        walls.append(time.perf_counter() - start)
    measured["embedding"] = _part(time.process_time() - began, walls, len(texts))
    for batch in (4, 16):  # what micro-batching concurrent queries would cost per text
        walls, began = [], time.process_time()
        for start in range(0, len(texts), batch):
            tick = time.perf_counter()
            local.encode_blocking([local.query_prefix + t for t in texts[start : start + batch]])
            walls.append((time.perf_counter() - tick) / len(texts[start : start + batch]))
        measured[f"embedding, batches of {batch}"] = _part(
            time.process_time() - began, walls, len(texts)
        )
    measured["embedding, two processes at once"] = _two_at_once(settings, texts)
    assert db.server is not None
    postgres = ProcessTree(postmaster_pid(db.server.pgdata))
    stub = StubEmbedder(local.model_id, local.dimensions, vectors)
    for mode in MODES:
        requests = [
            search_request(db.settings, local.model_id, query=t, mode=mode, top_k=10) for t in texts
        ]
        for request in requests[:10]:  # plans cached, pool filled
            await search(db.sessions, stub, tenant_id=tenant_id, request=request)
        walls, began, pg_began = [], time.process_time(), postgres.seconds()
        for request in requests:
            start = time.perf_counter()
            await search(db.sessions, stub, tenant_id=tenant_id, request=request)
            walls.append(time.perf_counter() - start)
        python_s, sql_s = time.process_time() - began, postgres.seconds() - pg_began
        measured[f"python {mode.value}"] = _part(python_s, walls, len(requests))
        measured[f"sql {mode.value}"] = _part(sql_s, walls, len(requests))
    measured |= await _in_turns(db, stub, tenant_id, texts)
    return measured


async def _in_turns(
    db: BenchDatabase, embedder: StubEmbedder, tenant_id: str, texts: list[str]
) -> dict[str, Any]:
    """Median Python CPU per search of each mode, the modes taking turns request by request, in
    a rotating order (a search runs warmer after one of its kind); the texts that go the direct
    path (no web-search operators, as search.py decides), then the same searches filtered by
    their collection (every chunk kept), which go the direct way too, and by their source type
    (every chunk kept), which go the session's way."""
    direct = [text for text in texts if not EXPLICIT_OPERATORS.search(text)]
    measured: dict[str, Any] = {}
    for way, filters in WAYS.items():
        cpu: dict[SearchMode, list[float]] = {mode: [] for mode in MODES}
        walls: dict[SearchMode, list[float]] = {mode: [] for mode in MODES}
        for _round in range(3):
            for i, text in enumerate(direct):
                for mode in MODES[i % 3 :] + MODES[: i % 3]:  # each mode after each other
                    request = search_request(
                        db.settings,
                        embedder.model_id,
                        query=text,
                        mode=mode,
                        top_k=10,
                        filters=filters,
                    )
                    began, start = time.process_time(), time.perf_counter()
                    await search(db.sessions, embedder, tenant_id=tenant_id, request=request)
                    walls[mode].append(time.perf_counter() - start)
                    cpu[mode].append(time.process_time() - began)
        for mode in MODES:
            measured[f"python {mode.value}, {way}, in turns"] = {
                "cpu_ms": round(1000 * statistics.median(cpu[mode]), 3),
                "wall_p50_ms": round(1000 * statistics.median(walls[mode]), 3),
            }
    return measured


def _two_at_once(settings: Settings, texts: list[str]) -> dict[str, float]:
    """Two processes embedding one text per call at the same time, as two busy workers do:
    whether the CPU of one inference grows when the other core computes too."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        results = pool.starmap(_embed_alone, [(settings, texts), (settings, texts)])
    return {
        "cpu_ms": round(statistics.mean(r[0] for r in results), 3),
        "wall_p50_ms": round(statistics.mean(r[1] for r in results), 3),
    }


def _embed_alone(settings: Settings, texts: list[str]) -> tuple[float, float]:
    local = LocalEmbedder.load(settings)
    local.encode_blocking(texts[:5])
    walls, began = [], time.process_time()
    for text in texts:
        start = time.perf_counter()
        local.encode_blocking([local.query_prefix + text])
        walls.append(time.perf_counter() - start)
    return 1000 * (time.process_time() - began) / len(texts), 1000 * statistics.median(walls)


def _part(cpu_s: float, walls: list[float], count: int) -> dict[str, float]:
    return {
        "cpu_ms": round(1000 * cpu_s / count, 3),
        "wall_p50_ms": round(1000 * statistics.median(walls), 3),
    }
