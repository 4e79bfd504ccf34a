"""Standard Webhooks signatures (https://www.standardwebhooks.com): the HMAC-SHA256 of
`{id}.{timestamp}.{body}` with the secret's key, in base64, as `v1,<signature>`."""

from __future__ import annotations

import base64
import hashlib
import hmac

from app.settings import webhook_key


def signature(secret: str, *, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(webhook_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(secret: str, *, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers a receiver verifies (the timestamp is the attempt's own)."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(
            secret, message_id=message_id, timestamp=timestamp, body=body
        ),
    }
