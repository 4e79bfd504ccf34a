"""Files read in worker processes that are killed when one overruns its budget.

A thread cannot be stopped, and a pure-Python parser holding the GIL slows the event loop
too; a process can be killed. `FileSandbox` keeps `workers` spawned processes (pebble's
ProcessPool: a worker that overruns is killed and replaced), so a hostile upload (a PDF, a
Word, PowerPoint, Excel, EPUB or ODT file, or markdown or HTML past `ParseLimits.inline_bytes`)
costs at most one worker for
`ParseLimits.budget(size)` seconds, the event loop and the other tenants' requests stay
responsive meanwhile, and no more than `workers` cores ever parse files at once (the next
uploads wait for a free worker, within their own budget).

Each worker's memory is bounded too: its address space is capped (RLIMIT_AS) at
`max_memory_mb` (RAG_PARSE_MAX_MEMORY_MB), so a small file that would inflate into gigabytes of
objects (a 2 MB markdown list is a million parser tokens, a gigabyte) fails its allocation in
the worker: a 422 naming the limit, the worker's memory freed as the error unwinds, and the
worker reads on. An allocation that fails inside C code may kill the worker instead: that is
the 422 of a worker that stopped, and pebble replaces it.

A PDF's pages without a text layer are read by OCR (ocr.py) in a second call to a worker,
under a budget of their own: `RAG_PARSE_SECONDS` plus `RAG_OCR_SECONDS_PER_PAGE` for each such
page, so a scan is given the time its pages need and a few kilobytes of PDF still no more than
the budget of their size.
"""

from __future__ import annotations

import multiprocessing
import resource
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool

from pebble import ProcessExpired, ProcessPool

from app.errors import ServiceUnavailable, Unprocessable
from app.ingest.parsing.files import read_text
from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.markup import size_of
from app.ingest.parsing.model import ParsedDocument, SourceType
from app.ingest.parsing.ocr import read_scanned

_REPRINT = {SourceType.PDF: "; a PDF printed again from its source usually reads"}


MIB = 1024 * 1024


class OutOfMemory(Exception):
    """A worker's allocation failed under its address-space cap (pickled back to the parent)."""


def _cap_memory(max_bytes: int) -> None:
    """A worker's initializer: its address space is at most `max_bytes` (0: unbounded)."""
    if max_bytes:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _read_capped(
    content: str | bytes, source_type: SourceType, limits: ParseLimits
) -> ParsedDocument:
    """`read_text` in a worker; a MemoryError goes back as OutOfMemory, once what the read
    built is freed (a MemoryError may not even pickle without memory to spare)."""
    try:
        return read_text(content, source_type, limits)
    except MemoryError:
        pass
    raise OutOfMemory


def _ocr_capped(content: bytes, parsed: ParsedDocument, limits: ParseLimits) -> ParsedDocument:
    """`read_scanned` (OCR of a PDF's pages without text) in a worker, as `_read_capped`."""
    try:
        return read_scanned(content, parsed, limits)
    except MemoryError:
        pass
    raise OutOfMemory


class FileSandbox:
    """A `FileReading` that parses in killable worker processes; close() it when done."""

    def __init__(self, workers: int = 1, *, max_memory_mb: int = 0) -> None:
        self._workers = workers
        self._max_memory_mb = max_memory_mb
        self._pool: ProcessPool | None = None  # started by the first file
        self._lock = threading.Lock()

    def _started(self) -> ProcessPool:
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the service process holds threads (event loop, torch)
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPool(
                    max_workers=self._workers,
                    context=context,
                    initializer=_cap_memory,
                    initargs=(self._max_memory_mb * MIB,),
                )
            return self._pool

    def __call__(
        self, content: str | bytes, source_type: SourceType, limits: ParseLimits
    ) -> ParsedDocument:
        """Blocking (call it from a worker thread): the parsed file, or the error that stopped
        it, 422 when it overran its budget or killed its worker. A PDF's scanned pages are
        read by OCR in a second call, under a budget of their own (`ParseLimits.ocr_budget`)."""
        budget = limits.budget(size_of(content))
        kind = SourceType(source_type)
        parsed = self._run(
            _read_capped,
            (content, kind, limits),
            kind,
            budget,
            f"reading the {kind.label} took longer than its budget of {budget:.1f} s "
            f"(RAG_PARSE_SECONDS {limits.seconds:g} s + RAG_PARSE_SECONDS_PER_MB "
            f"{limits.seconds_per_mb:g} s per MB sent) and was stopped: the file is "
            f"malformed or built to be slow{_REPRINT.get(kind, '')}",
            {"limit": "seconds", "value": round(budget, 3)},
        )
        if not parsed.scanned_pages or not isinstance(content, bytes):
            return parsed
        budget = limits.ocr_budget(len(parsed.scanned_pages))
        return self._run(
            _ocr_capped,
            (content, parsed, limits),
            kind,
            budget,
            f"reading the {kind.label}'s {len(parsed.scanned_pages):,} scanned page(s) by OCR "
            f"took longer than its budget of {budget:.1f} s (RAG_PARSE_SECONDS "
            f"{limits.seconds:g} s + RAG_OCR_SECONDS_PER_PAGE {limits.ocr_seconds_per_page:g} s "
            "a page) and was stopped",
            {"limit": "ocr_seconds_per_page", "value": limits.ocr_seconds_per_page},
        )

    def _run(
        self,
        work: Callable[..., ParsedDocument],
        args: tuple[object, ...],
        kind: SourceType,
        budget: float,
        overrun: str,
        limit: dict[str, object],
    ) -> ParsedDocument:
        """`work(*args)` in a worker, stopped past `budget` seconds (a 422 saying `overrun`)."""
        future = self._started().schedule(work, args=args, timeout=budget)
        try:
            parsed: ParsedDocument = future.result()
        except FutureTimeout:
            raise Unprocessable(overrun, extra=limit) from None
        except (OutOfMemory, MemoryError):
            raise Unprocessable(
                f"reading the {kind.label} needed more memory than a parse worker may have "
                f"(RAG_PARSE_MAX_MEMORY_MB {self._max_memory_mb:,} MB of address space) and was "
                "stopped: the file is malformed or built to be costly, or raise the limit",
                extra={"limit": "max_memory_mb", "value": self._max_memory_mb},
            ) from None
        except ProcessExpired as exc:
            raise Unprocessable(
                f"the {kind.label} reader stopped on this file ({exc}): it is malformed"
            ) from None
        except (BrokenProcessPool, RuntimeError) as exc:  # stopped, or could not start one
            raise ServiceUnavailable(f"no file reader process is available: {exc}") from exc
        return parsed

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()  # type: ignore[no-untyped-call]
            pool.join()
