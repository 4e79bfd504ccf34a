"""Helpers for tests that start the service as its own process."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from redis.asyncio import Redis
from redis.exceptions import RedisError


@contextmanager
def scratch_directory(prefix: str) -> Iterator[Path]:
    """A new directory under the system's temporary one, removed afterwards with whatever is
    left in it. Not under pytest's basetemp: pytest keeps that 0700, out of reach of the
    embedded server's system user."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# Ports handed to the servers the tests start: each pytest-xdist worker (and the controller,
# or a run without xdist) takes from a block of its own, below Linux's ephemeral range
# (32768-60999) where no outgoing connection lands. A port asked of the kernel (bind to 0)
# could be handed to another worker's server between our check and our server's bind, and
# our readiness poll then got its 200 from that server (seen in CI: `rag serve` was sent
# Ctrl-C while it was still importing).
FIRST_PORT, BLOCK = 20_000, 1_000
_taken = itertools.count()


def free_port() -> int:
    """A port free now that no other test process hands out."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1"... or none
    block = int(worker[2:]) + 1 if worker[2:].isdigit() else 0
    start = FIRST_PORT + (block % 12) * BLOCK
    for _ in range(BLOCK):
        port = start + next(_taken) % BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or still in TIME_WAIT from an earlier server
            return port
    raise RuntimeError(f"no free port in {start}-{start + BLOCK - 1}")


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


class PrivateRedis:
    """A redis-server of our own on a fixed port, so a test can stop and restart it (it keeps
    nothing on disk: a restart comes back empty, as the machine's does)."""

    def __init__(self, binary: str) -> None:
        self.binary, self.port = binary, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self._process = await asyncio.create_subprocess_exec(
            self.binary, *args, stdout=asyncio.subprocess.DEVNULL
        )
        probe = Redis.from_url(self.url, socket_timeout=0.25, socket_connect_timeout=0.25)
        try:
            for _ in range(200):
                try:
                    if await probe.ping():
                        return
                except RedisError:
                    await asyncio.sleep(0.025)
            raise RuntimeError("redis-server did not start")
        finally:
            await probe.aclose()

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()
