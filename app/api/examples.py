"""Request examples for the OpenAPI explorer: real bodies that work as they are.

The first example of each body is what Swagger UI's "Try it out" starts from: the first
search and context examples find the README tutorial's pages (collection `handbook`, markdown,
about backups) and the markdown document below alike; the metadata example finds that document
only (team `sre`, year 2026), which the tutorial's files do not carry.
"""

from __future__ import annotations

from typing import Any

from fastapi.openapi.models import Example

MARKDOWN_DOCUMENT: dict[str, Any] = {
    "title": "Operations guide",
    "external_id": "ops-guide",
    "collection": "handbook",
    "source_type": "markdown",
    "source_url": "https://example.com/ops",
    "metadata": {"team": "sre", "year": 2026},
    "content": "# Operations guide\n\n## Backups\n\nBackups run nightly at 02:00 UTC and are "
    "kept for 30 days.\n\n## On call\n\nThe on-call engineer answers pages within 15 minutes.",
}

SEARCH: dict[str, Example] = {
    "filtered": Example(
        summary="Hybrid search in a collection, markdown only",
        description="Finds the README tutorial's backups page (or the example document of "
        "POST /api/rag/documents): collections and source types narrow the search.",
        value={
            "query": "how long are backups kept?",
            "mode": "hybrid",
            "max_results": 5,
            "collections": ["handbook"],
            "filters": {"source_types": ["markdown"]},
        },
    ),
    "metadata": Example(
        summary="Metadata conditions: a value and a range",
        description="Finds the example document of POST /api/rag/documents (team sre, year "
        "2026); files ingested by `rag ingest` carry their `filename` instead.",
        value={
            "query": "when do backups run?",
            "filters": {"metadata": {"team": "sre", "year": {"gte": 2025}}},
        },
    ),
    "simple": Example(summary="Plain vector search", value={"query": "on-call response time"}),
    "keyword": Example(
        summary="Keyword search: quotes and -word as in web search",
        value={"query": '"nightly" backups -weekly', "mode": "keyword", "max_results": 10},
    ),
}

CONTEXT: dict[str, Example] = {
    "numbered": Example(
        summary="Numbered context within 1500 tokens",
        value={
            "query": "when do backups run?",
            "style": "numbered",
            "max_tokens": 1500,
            "max_results": 10,
            "collections": ["handbook"],
        },
    ),
    "inline": Example(
        summary="Inline citations, hybrid search",
        value={"query": "who answers pages?", "style": "inline", "mode": "hybrid"},
    ),
}

DOCUMENT: dict[str, Example] = {
    "markdown": Example(
        summary="A markdown document (headings become the section path)",
        value=MARKDOWN_DOCUMENT,
    ),
    "text": Example(
        summary="Plain text, identified by its content hash",
        value={"title": "Release note", "content": "Version 2.4 adds hybrid search."},
    ),
    "html": Example(
        summary="An HTML page",
        value={
            "title": "Status page",
            "external_id": "status",
            "source_type": "html",
            "content": "<h1>Status</h1><p>All systems operational.</p>",
        },
    ),
    "restricted": Example(
        summary="A document only HR and one person may see",
        value={
            "title": "Salary bands 2026",
            "external_id": "salary-bands",
            "content": "Band 3 starts at 58,000.",
            "access": ["group:hr", "user:alice@example.com"],
        },
    ),
}

DOCUMENT_PATCH: dict[str, Example] = {
    "access": Example(
        summary="Restrict a document to two groups (never re-embeds)",
        value={"access": ["group:hr", "group:legal"]},
    ),
    "public": Example(summary="Open it to every member of the tenant", value={"access": []}),
    "metadata": Example(summary="Replace its metadata", value={"metadata": {"team": "people"}}),
}

BATCH: dict[str, Example] = {
    "two": Example(
        summary="Two documents in one call",
        value={
            "documents": [
                MARKDOWN_DOCUMENT,
                {
                    "title": "Security policy",
                    "external_id": "security-policy",
                    "collection": "handbook",
                    "content": "Passwords rotate every 90 days. Report incidents to security.",
                    "metadata": {"team": "security"},
                },
            ]
        },
    )
}

SYNC: dict[str, Example] = {
    "mirror": Example(
        summary="The collection's whole content: changed pages in full, the rest by version",
        value={
            "documents": [
                {
                    "external_id": "backups.md",
                    "version": "2026-11-29T09:00:00Z",
                    "title": "Backups",
                    "source_type": "markdown",
                    "content": "# Backups\n\nBackups are kept for 30 days.",
                },
                {"external_id": "vpn.md", "version": "2026-10-02T14:30:00Z"},
            ],
            "max_deletions": 0.1,
        },
    ),
    "dry": Example(
        summary="What would change, changing nothing",
        value={"documents": [{"external_id": "vpn.md", "version": "v7"}], "dry_run": True},
    ),
}

TENANT_CREATE: dict[str, Example] = {
    "basic": Example(
        summary="A tenant on the basic tier",
        value={"id": "acme", "name": "Acme Corp.", "tier": "basic"},
    )
}

TENANT_PATCH: dict[str, Example] = {
    "retier": Example(summary="Move to another tier", value={"tier": "pro"}),
    "suspend": Example(summary="Suspend", value={"status": "suspended"}),
    "rename": Example(summary="Rename", value={"name": "Acme Corporation"}),
}

DEDUPE: dict[str, Example] = {
    "preview": Example(
        summary="Preview near-duplicate groups (changes nothing)",
        description="A dry run: the groups a merge would act on, the copy each strategy "
        "keeps, and what differs between the copies.",
        value={"similarity_threshold": 0.9, "dry_run": True, "collections": ["handbook"]},
    ),
    "merge": Example(
        summary="Merge: keep the latest source version of each group (needs rag:ingest)",
        value={
            "similarity_threshold": 0.95,
            "dry_run": False,
            "merge_strategy": "keep_latest_version",
        },
    ),
}

JOB_DOCUMENTS: dict[str, Any] = {
    "documents": [MARKDOWN_DOCUMENT],
}
