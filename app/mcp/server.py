"""The MCP server: the tools and resources of this service, with what an agent reads first.

`build_server(model_id)` lists every tool once, with its name, description and read-only
annotations; the HTTP door (http.py) and stdio (stdio.py) serve the same server. A new tool is
one function in tools.py and one `Tool` entry in `tools_for` below.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp.server.mcpserver import MCPServer, ResourceSecurity
from mcp.types import ToolAnnotations

from app import __version__
from app.embeddings.thresholds import default_threshold
from app.mcp import catalog, tools
from app.settings import Settings

NAME = "rag-service"
INSTRUCTIONS = (
    "Search and cite the documents of your tenant (and only yours). To answer a question, call "
    "get_context and cite its [n] markers with the citations it returns. To look around, "
    "search, then fetch a result's id for its full text; rag://collections lists what there is."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    run: Callable[..., Awaitable[object]]
    description: str


def threshold_advice(settings: Settings, model_id: str) -> str:
    """What similarity means for the model this deployment embeds with."""
    floor = default_threshold(settings, model_id)
    if model_id.startswith("local:"):
        return (
            f"This service embeds with {model_id}, whose similarities run lower than OpenAI "
            "models': unrelated passages score about 0.0-0.3 and relevant ones mostly "
            "0.35-0.65, so 0.7 keeps only the closest match or two and often nothing. Use about "
            "0.4 for 'related' (on medical abstracts it kept 76% of relevant documents and 1% of "
            "the others), 0.5-0.6 for 'closely related'."
        )
    if model_id.startswith("openai:"):
        return (
            f"This service embeds with {model_id}, whose similarities run higher than local "
            "MiniLM models'; 0.7 keeps only close matches: lower it (about 0.5) for 'related'."
        )
    suffix = f" (its default floor is {floor})" if floor is not None else ""
    return f"This service embeds with {model_id}{suffix}; similarities depend on the model."


def tools_for(settings: Settings, model_id: str) -> list[Tool]:
    floor = default_threshold(settings, model_id)
    floor_note = (
        f" Passages under the default similarity floor ({floor}) are left out, so count may be "
        "below limit."
        if floor is not None
        else ""
    )
    return [
        Tool(
            "search_similar",
            tools.search_similar,
            "Find the passages of the tenant's documents closest in meaning to `query` (vector "
            "search, most similar first). Each result is a chunk: its text, similarity, source "
            "file and type, page, position in the document and metadata." + floor_note,
        ),
        Tool(
            "semantic_search",
            tools.semantic_search,
            "Like search_similar, keeping only passages whose similarity is at or above "
            f"`threshold` (default 0.7). {threshold_advice(settings, model_id)}",
        ),
        Tool(
            "search",
            tools.search,
            "Search the tenant's documents (hybrid by default: meaning and exact words) and "
            "return short results {id, title, url, text}, best first. Call `fetch` with a "
            "result's id for its full text and citation.",
        ),
        Tool(
            "fetch",
            tools.fetch,
            "The full text of a search result (a chunk id) or of a whole document (a document "
            "id), with its title, URL, citation and metadata. Unknown ids are an error.",
        ),
        Tool(
            "get_context",
            tools.get_context,
            "A context block for answering `query` from the tenant's documents: the most "
            "relevant passages as numbered blocks [n], each with its source, within "
            "`max_tokens`; the citations to list under the answer; and quality metrics "
            "(avg_similarity, source_diversity, quality_score). Cite passages by their [n].",
        ),
        Tool(
            "find_similar",
            tools.find_similar,
            "Items like a given one ('more like this'): for a chunk id, the closest chunks of "
            "other documents; for a document id, the closest documents (each with its best "
            "chunk). Most similar first, at or above `min_similarity` (0.85: near-copies and "
            "close paraphrases; lower it for 'related'). Unknown ids are an error.",
        ),
        Tool(
            "find_duplicates",
            tools.find_duplicates,
            "Groups of near-duplicate documents in the tenant (document similarity at or above "
            "`similarity_threshold`), each with the document a merge would keep. Preview only: "
            "it never deletes; merging is POST /api/rag/dedupe with rag:ingest.",
        ),
    ]


def build_server(settings: Settings, model_id: str) -> MCPServer:
    # log_level only matters when nothing configured logging: the SDK then installs a handler.
    server: MCPServer = MCPServer(
        NAME,
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        subscriptions=False,  # nothing to notify: no subscriptions/listen streams held open
    )
    for tool in tools_for(settings, model_id):
        server.add_tool(
            tool.run,
            name=tool.name,
            description=tool.description,
            annotations=READ_ONLY,
            structured_output=True,
        )
    resources = (
        ("rag://collections", catalog.collections, "The tenant's collections with counts."),
        ("rag://collections/{name}", catalog.collection, "A collection and its latest documents."),
        ("rag://documents/{document_id}", catalog.document, "A document's text and citation."),
    )
    # Values are looked up in the database, never used as paths: a collection may be "a/../b".
    as_data = ResourceSecurity(exempt_params={"name", "document_id"})
    for uri, read, description in resources:
        server.resource(
            uri, description=description, mime_type="application/json", security=as_data
        )(read)
    return server
