"""Helpers for tests that start the service as its own process."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from redis.asyncio import Redis
from redis.exceptions import RedisError

from bench.kit.ports import free_port

__all__ = ["free_port"]  # ports for the servers the tests start (bench/kit/ports.py)


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
