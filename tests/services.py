"""The servers the tests need, started once and kept for a developer's quick runs
(docs/TESTING.md): an embedded PostgreSQL + pgvector and a redis-server, both throwaway.

    .venv/bin/python -m tests.services        # prints two exports, then waits for Ctrl-C

With the two variables exported, `pytest tests/api/test_search.py` starts no server: it makes
and migrates a database of its own on the running one (a second or two) and uses the Redis
database 15 of the running redis-server, which it empties first.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from app.db.embedded import start_embedded
from tests.processes import free_port


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds: both servers stop
    began = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="rag-test-services-"))
    directory.chmod(0o755)  # the embedded server's system user must reach its data directory
    server = start_embedded(directory / "pgdata", delete_on_exit=True)
    port = free_port()
    binary = shutil.which("redis-server") or sys.exit("redis-server is not installed")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    cache = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    redis_url = f"redis://127.0.0.1:{port}/15"
    try:
        while True:
            try:
                redis.Redis.from_url(redis_url, socket_connect_timeout=0.5).ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        print(  # noqa: T201
            f"# the tests' servers, up in {time.monotonic() - began:.1f} s; Ctrl-C stops them\n"
            f"export RAG_TEST_DATABASE_URL='{server.url(user='postgres', database='postgres')}'\n"
            f"export RAG_TEST_REDIS_URL='{redis_url}'",
            flush=True,
        )
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cache.terminate()
        cache.wait(5)
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
