"""A rerank server on loopback that speaks Cohere's, Jina's or text-embeddings-inference's
wire format, scoring a document by how often it holds a favourite word (so a test can tell the
reranker's order from the first stage's), and answering with the statuses of its script; or,
given a `reply`, with that (a hostile server: deep nesting, a trickle, an endless body)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.loopback import Reply, loopback_server

PATHS = {"cohere": "/v2/rerank", "jina": "/v1/rerank", "tei": "/rerank"}


@dataclass
class FakeReranker:
    provider: str
    favourite: str
    url: str = ""
    statuses: list[int] = field(default_factory=lambda: [200])
    delay_seconds: float = 0.0
    reply: Callable[[], Reply] | None = None  # answers every call instead, when set
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        self.requests.append((path, headers, body))
        status = self.statuses[min(len(self.requests) - 1, len(self.statuses) - 1)]
        if path != PATHS[self.provider]:
            return 404, {"message": "no such route"}
        if status != 200:
            return status, {"message": "invalid api token" if status == 401 else "boom"}
        texts = body["texts"] if self.provider == "tei" else body["documents"]
        scores = [text.lower().count(self.favourite) / (1 + len(text) / 1000) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        if self.provider == "tei":
            return 200, [{"index": i, "score": scores[i]} for i in order]
        top = order[: int(body["top_n"])]
        return 200, {"results": [{"index": i, "relevance_score": scores[i]} for i in top]}


@contextmanager
def fake_reranker(provider: str, favourite: str) -> Iterator[FakeReranker]:
    fake = FakeReranker(provider, favourite)

    def answer(path: str, headers: dict[str, str], body: bytes) -> Reply:
        if fake.delay_seconds:
            time.sleep(fake.delay_seconds)
        status, reply = fake.answer(path, headers, json.loads(body))
        if fake.reply is not None:
            return fake.reply()
        return Reply(status, json.dumps(reply).encode(), "application/json")

    with loopback_server(answer) as url:
        fake.url = url
        yield fake
