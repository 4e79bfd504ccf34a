"""A rerank reply, read as it streams in and no further than a bound: a reply past it is
dropped (the connection closed) after reading at most the bound, never held whole.

The bound is MIN_REPLY_BYTES (1 MiB) plus twice the UTF-8 size of the documents sent: an
answer for 200 candidates is some 10 KB, and a server that echoes the documents (Jina does,
JSON-escaped) stays within it. Replies are asked for unencoded; one compressed anyway is not
read (it could grow past any bound once inflated)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

MIN_REPLY_BYTES = 2**20
IDENTITY = {"Accept-Encoding": "identity"}


class ReplyTooLarge(Exception):
    """The reply went past its bound."""


class ReplyEncoded(Exception):
    """The reply came compressed though it was asked for unencoded."""


def reply_bound(documents: Sequence[str]) -> int:
    """The most a reply to `documents` may hold, in bytes."""
    return MIN_REPLY_BYTES + 2 * sum(len(text.encode(errors="replace")) for text in documents)


async def post_for_reply(
    client: httpx.AsyncClient, url: str, *, body: dict[str, Any], bound: int
) -> tuple[int, bytes]:
    """POST `body` as JSON; the reply's status and body, of at most `bound` bytes."""
    async with client.stream("POST", url, json=body, headers=IDENTITY) as reply:
        if reply.headers.get("content-encoding", "identity").lower() != "identity":
            raise ReplyEncoded(reply.headers["content-encoding"])
        declared = reply.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > bound:
            raise ReplyTooLarge
        content = bytearray()
        async for chunk in reply.aiter_raw():
            content += chunk
            if len(content) > bound:
                raise ReplyTooLarge
        return reply.status_code, bytes(content)
