"""The endpoints the reliability suite attacks, one row per place caller input reaches SQL.

A row says how to put a value into one slot of one endpoint's request (`build(value)`), which
door answers (REST problem+json, or an MCP tool result) and how the 422 names the field. To bring
a new endpoint (or a new field) under every bad-input test, add one row to `SLOTS`; the isolation
and schema suites read `ENDPOINTS` the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Json = dict[str, Any]


class Door(StrEnum):
    REST = "rest"
    MCP = "mcp"


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request, relative to the app; `admin` sends a rag:admin token."""

    method: str
    path: str
    json: object | None = None
    params: dict[str, str] = field(default_factory=dict)
    admin: bool = False
    door: Door = Door.REST


def mcp_call(tool: str, **arguments: object) -> Call:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return Call("POST", "/mcp", json=body, door=Door.MCP)


@dataclass(frozen=True, slots=True)
class Slot:
    """One slot: `build(value)` is the request with `value` in it; `field` prefixes the name
    the 422 gives (REST), or appears in the tool error (MCP)."""

    name: str
    field: str
    build: Callable[[str], Call]


_NO_ID = "00000000-0000-4000-8000-000000000000"  # validation answers before any lookup


def _search(body: Json, path: str = "/api/rag/search") -> Call:
    return Call("POST", path, json={"query": "estuary", **body})


SLOTS: list[Slot] = [
    Slot("search query (vector)", "query", lambda v: _search({"query": v})),
    Slot("search query (keyword)", "query", lambda v: _search({"query": v, "mode": "keyword"})),
    Slot("search query (hybrid)", "query", lambda v: _search({"query": v, "mode": "hybrid"})),
    Slot("search collection", "collections", lambda v: _search({"collections": [v]})),
    Slot(
        "search metadata key",
        "filters.metadata",
        lambda v: _search({"filters": {"metadata": {v: "x"}}}),
    ),
    Slot(
        "search metadata value",
        "filters.metadata",
        lambda v: _search({"filters": {"metadata": {"k": v}}}),
    ),
    Slot(
        "search metadata in-list",
        "filters.metadata",
        lambda v: _search({"filters": {"metadata": {"k": {"in": ["a", v]}}}}),
    ),
    Slot(
        "search metadata range key",
        "filters.metadata",
        lambda v: _search({"filters": {"metadata": {v: {"gte": 1}}}}),
    ),
    Slot(
        "search metadata eq",
        "filters.metadata",
        lambda v: _search({"filters": {"metadata": {"k": {"eq": v}}}}),
    ),
    Slot("context query", "query", lambda v: _search({"query": v}, "/api/rag/context")),
    Slot(
        "context collection",
        "collections",
        lambda v: _search({"collections": [v]}, "/api/rag/context"),
    ),
    Slot(
        "documents list collection",
        "collection",
        lambda v: Call("GET", "/api/rag/documents", params={"collection": v}),
    ),
    Slot(
        "document ingest section",
        "chunks",
        lambda v: Call(
            "POST",
            "/api/rag/documents",
            json={"content": "c", "chunks": [{"content": "c", "embedding": [1.0], "section": [v]}]},
        ),
    ),
    Slot(
        "admin tenant name",
        "name",
        lambda v: Call("POST", "/api/admin/tenants", json={"id": "rel-x", "name": v}, admin=True),
    ),
    Slot("mcp search_similar query", "query", lambda v: mcp_call("search_similar", query=v)),
    Slot("mcp search query", "query", lambda v: mcp_call("search", query=v, mode="keyword")),
    Slot(
        "mcp search collection",
        "collections",
        lambda v: mcp_call("search", query="x", collections=[v]),
    ),
    Slot(
        "mcp search metadata",
        "filters",
        lambda v: mcp_call("search", query="x", filters={"metadata": {"k": v}}),
    ),
    Slot("mcp get_context query", "query", lambda v: mcp_call("get_context", query=v)),
    Slot(
        "similar chunks collections",
        "collections",
        lambda v: Call("GET", f"/api/rag/chunks/{_NO_ID}/similar", params={"collections": v}),
    ),
    Slot(
        "similar documents collections",
        "collections",
        lambda v: Call("GET", f"/api/rag/documents/{_NO_ID}/similar", params={"collections": v}),
    ),
    Slot(
        "dedupe collections",
        "collections",
        lambda v: Call("POST", "/api/rag/dedupe", json={"collections": [v]}),
    ),
    Slot(
        "mcp find_duplicates collections",
        "collections",
        lambda v: mcp_call("find_duplicates", collections=[v]),
    ),
    Slot(
        "job document title",
        "documents",
        lambda v: Call("POST", "/api/rag/jobs", json={"documents": [{"content": "c", "title": v}]}),
    ),
    Slot(
        "job document collection",
        "documents",
        lambda v: Call(
            "POST", "/api/rag/jobs", json={"documents": [{"content": "c", "collection": v}]}
        ),
    ),
]

# Text PostgreSQL cannot store: NUL, and a lone surrogate (what JSON's "\ud800" decodes to).
UNSTORABLE = {"nul": "a\x00b", "surrogate": "a\ud800b"}

# Integer query parameters and a value past each one's documented bound.
INTEGER_PARAMS: list[tuple[str, str, str, bool]] = [
    ("documents offset", "/api/rag/documents", "offset", False),
    ("documents limit", "/api/rag/documents", "limit", False),
    ("admin tenants offset", "/api/admin/tenants", "offset", True),
    ("admin tenants limit", "/api/admin/tenants", "limit", True),
    ("jobs offset", "/api/rag/jobs", "offset", False),
    ("jobs limit", "/api/rag/jobs", "limit", False),
    ("similar top_k", f"/api/rag/chunks/{_NO_ID}/similar", "top_k", False),
]
TOO_BIG = ["9223372036854775808", "1" + "0" * 40, "-9223372036854775809"]
