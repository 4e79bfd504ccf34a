"""Helpers for tests that start the service as its own process."""

from __future__ import annotations

import socket
import time

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_healthy(url: str, timeout: float = 240) -> bool:
    """Poll `url` until it answers 200 (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    return False
