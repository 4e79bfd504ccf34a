"""Long-lived resources, opened and closed by the app's lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from app.auth import TokenVerifier
from app.citations import ApproxTokenCounter, TokenCounter, load_token_counter
from app.db.counters import flushing
from app.db.engine import create_engine, create_sessionmaker, vector_column_dimensions
from app.db.replicas import ReadConsistency, ReplicaSet, watched_replicas
from app.db.scoped import settled
from app.db.tenancy import SessionMaker, reading_as
from app.embeddings import Embedder, build_embedder, check_dimensions
from app.embeddings.local import default_tokenizer_path
from app.errors import ServiceUnavailable
from app.ingest.chunking import Chunker, load_tokenizer
from app.ingest.parsing import ParseLimits, Parser
from app.ingest.parsing.sandbox import FileSandbox
from app.permissions import EVERY_DOCUMENT, Readers
from app.ratelimit import RateLimiter, build_rate_limiter
from app.retrieval.rerank import Reranker
from app.retrieval.returns import ReturnCounter
from app.settings import Settings
from app.tenants import TenantDirectory
from app.usage import UsageRecorder

if TYPE_CHECKING:
    from redis.asyncio import Redis

_log = logging.getLogger(__name__)
T = TypeVar("T")
HEADER_TOKENS = 48  # room for the contextual header (title, section path) in the model's input


@dataclass(frozen=True, slots=True)
class Resources:
    """What requests share, for as long as the lifespan runs. Nothing of it is process-wide:
    `sessions` carries the state its transactions share (app/db/state.py: the plan choices
    remembered per tenant, the read-only transactions still committing), `returns` and `usage`
    the counts still to be flushed (app/db/counters.py)."""

    settings: Settings
    engine: AsyncEngine
    sessions: SessionMaker
    verifier: TokenVerifier
    limiter: RateLimiter
    tenants: TenantDirectory
    embedder: Embedder
    chunker: Chunker
    parser: Parser
    token_counter: TokenCounter
    redis: Redis | None
    returns: ReturnCounter  # how often each document was returned (documents.access_count)
    usage: UsageRecorder
    replicas: ReplicaSet
    reranker: Reranker | None = None  # the second stage, when RAG_RERANK_PROVIDER names one
    readers: Readers | None = None  # set by `reading_as_caller`: whose documents reads see

    async def read(
        self,
        work: Callable[[SessionMaker], Awaitable[T]],
        *,
        consistency: ReadConsistency = ReadConsistency.REPLICA,
        recheck_missing: bool = False,
    ) -> T:
        """`work` on a healthy replica unless `consistency` asks for the primary (or none is
        healthy); a replica failing mid-way is retried once on the primary (app/db/replicas.py).
        `sessions` stays the primary's: writes, and reads that must see them, use it. The
        sessions `work` gets read as `readers`, on a replica as on the primary."""
        readers = self.readers

        async def as_readers(sessions: SessionMaker) -> T:
            return await work(sessions if readers is None else reading_as(sessions, readers))

        return await self.replicas.read(
            self.sessions, as_readers, consistency=consistency, recheck_missing=recheck_missing
        )

    def reading_as_caller(self, readers: Readers) -> Resources:
        """These resources with every transaction, writes and reads, reading as `readers`."""
        return replace(self, sessions=reading_as(self.sessions, readers), readers=readers)


@asynccontextmanager
async def open_resources(
    settings: Settings, *, embedder: Embedder | None = None, verifier: TokenVerifier | None = None
) -> AsyncIterator[Resources]:
    """Everything a request may need; `embedder` replaces the configured one (tests), and
    `verifier` the one the settings describe (`rag mcp` over stdio takes no tokens)."""
    if settings.database_url is None:
        raise ServiceUnavailable("RAG_DATABASE_URL is not set (`rag serve` embeds one)")
    verifier = verifier or TokenVerifier.from_settings(settings)
    engine = create_engine(
        settings.database_url.get_secret_value(),
        pool_size=settings.db_pool_size,
        statement_timeout_seconds=settings.db_statement_timeout_seconds,
    )
    sessions = create_sessionmaker(engine)
    limiter = build_rate_limiter(settings)
    redis = _redis(settings.redis_url) if settings.redis_url else None
    embedder = embedder or await build_embedder(settings)
    reranker = Reranker.from_settings(settings)
    try:
        check_dimensions(embedder, await _column_dimensions(engine, settings))
        with sandboxed_parser(settings) as parser:
            # The counters are the service's own bookkeeping: every document of the tenant.
            counted = reading_as(sessions, EVERY_DOCUMENT)
            returns, usage = ReturnCounter(), UsageRecorder()
            async with (
                flushing(returns, counted, every_seconds=settings.access_flush_seconds),
                flushing(usage, counted, every_seconds=settings.usage_flush_seconds),
                watched_replicas(settings, engine) as replicas,
            ):
                yield Resources(
                    settings=settings,
                    engine=engine,
                    sessions=sessions,
                    verifier=verifier,
                    limiter=limiter,
                    tenants=TenantDirectory(sessions, ttl_seconds=settings.tenant_cache_seconds),
                    embedder=embedder,
                    chunker=build_chunker(settings, embedder),
                    parser=parser,
                    token_counter=build_token_counter(settings, embedder),
                    redis=redis,
                    returns=returns,
                    usage=usage,
                    replicas=replicas,
                    reranker=reranker,
                )
    finally:
        await embedder.aclose()
        if reranker is not None:
            await reranker.aclose()
        await limiter.aclose()
        if redis is not None:
            await redis.aclose()
        await settled(sessions)  # the read-only transactions still committing (scoped.py)
        await engine.dispose()


def _redis(url: str) -> Redis:
    """The shared Redis client; redis-py is imported here, not by the commands without one."""
    from redis.asyncio import Redis

    return Redis.from_url(url, socket_timeout=1)


async def _column_dimensions(engine: AsyncEngine, settings: Settings) -> int:
    """The vector column's dimension; the configured one if the database is not up yet."""
    try:
        async with engine.connect() as conn:
            found = await vector_column_dimensions(conn)
    except OSError:
        _log.warning("database not reachable at start; /readyz will say when it is")
        return settings.embedding_dimensions
    return found or settings.embedding_dimensions


def parse_limits(settings: Settings) -> ParseLimits:
    return ParseLimits(
        seconds=settings.parse_seconds,
        seconds_per_mb=settings.parse_seconds_per_mb,
        max_pages=settings.parse_max_pages,
        max_chars=settings.parse_max_chars,
        max_inflated_bytes=settings.parse_max_inflated_bytes,
        max_unzipped_bytes=settings.parse_max_unzipped_bytes,
        max_rows=settings.parse_max_rows,
        max_xml_depth=settings.parse_max_xml_depth,
        max_xml_elements=settings.parse_max_xml_elements,
        inline_bytes=settings.parse_inline_bytes,
        ocr=settings.ocr,
        ocr_languages=settings.ocr_languages,
        ocr_max_pages=settings.ocr_max_pages,
        ocr_seconds_per_page=settings.ocr_seconds_per_page,
    )


@contextmanager
def sandboxed_parser(settings: Settings) -> Iterator[Parser]:
    """The parser of the service and the job workers: PDFs and the other binary formats in
    killable worker processes."""
    sandbox = FileSandbox(settings.parse_workers, max_memory_mb=settings.parse_max_memory_mb)
    try:
        yield Parser(parse_limits(settings), sandbox)
    finally:
        sandbox.close()


def build_chunker(settings: Settings, embedder: Embedder) -> Chunker:
    """Chunks sized in the model's own tokens, small enough for the model to read whole."""
    max_input = embedder.max_input_tokens
    chunk_tokens = settings.chunk_tokens
    if max_input is not None and chunk_tokens > max_input - HEADER_TOKENS:
        chunk_tokens = max_input - HEADER_TOKENS
        _log.info(
            "chunks of %d tokens: the model reads %d (RAG_CHUNK_TOKENS=%d)",
            chunk_tokens,
            max_input,
            settings.chunk_tokens,
        )
    overlap = min(settings.chunk_overlap_tokens, chunk_tokens // 4)
    tokenizer = load_tokenizer(_tokenizer_file(settings, embedder))
    return Chunker(tokenizer, chunk_tokens=chunk_tokens, overlap_tokens=overlap)


def _tokenizer_file(settings: Settings, embedder: Embedder) -> Path:
    return settings.tokenizer_file or embedder.tokenizer_file or default_tokenizer_path()


def build_token_counter(settings: Settings, embedder: Embedder) -> TokenCounter:
    """One counter for the process: its word cache keeps context assembly fast."""
    if settings.context_token_counter == "approx":
        return ApproxTokenCounter()
    return load_token_counter(_tokenizer_file(settings, embedder))
