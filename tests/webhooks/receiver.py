"""A webhook receiver on loopback for the tests: answers each POST with the next status of
its script (then the last one), verifies every request with the Standard Webhooks reference
library, and refuses a message it has already accepted (its `webhook-id`), as a receiver
should."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    verified: bool
    answered: int


@dataclass
class Receiver:
    secret: str
    statuses: list[int]
    url: str = ""
    received: list[Received] = field(default_factory=list)
    accepted_ids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verify(self, body: bytes, headers: dict[str, str]) -> bool:
        """The reference verification (signature, and a timestamp within five minutes),
        and no second acceptance of one message."""
        try:
            Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            return False
        return headers["webhook-id"] not in self.accepted_ids

    def answer(self, body: bytes, headers: dict[str, str]) -> int:
        with self.lock:
            verified = self.verify(body, headers)
            status = self.statuses[min(len(self.received), len(self.statuses) - 1)]
            if not verified:
                status = 400
            elif 200 <= status < 300:
                self.accepted_ids.add(headers["webhook-id"])
            self.received.append(Received(headers, body, verified, status))
            return status


@contextmanager
def receiving(secret: str, statuses: list[int]) -> Iterator[Receiver]:
    receiver = Receiver(secret, statuses)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {name.lower(): value for name, value in self.headers.items()}
            status = receiver.answer(body, headers)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/rag"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
