"""A webhook receiver on loopback for the tests: answers each POST with the next status of
its script (then the last one), verifies every request with the Standard Webhooks reference
library, and refuses a message it has already accepted (its `webhook-id`), as a receiver
should."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.loopback import Reply, loopback_server


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

    def answer(_path: str, headers: dict[str, str], body: bytes) -> Reply:
        return Reply(receiver.answer(body, headers))

    with loopback_server(answer) as url:
        receiver.url = f"{url}/hooks/rag"
        yield receiver
