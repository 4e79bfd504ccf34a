"""`rag serve` started the way a user starts it, for the black-box suite when no deployed
service is named: its embedded defaults (PostgreSQL + pgvector in a fresh data directory, the
local model), two worker processes sharing a Redis, a small rate limit for one tier. It is
driven through its command line and HTTP only."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.blackbox.target import Target, secret_minter
from tests.processes import free_port, scratch_directory, wait_healthy

RAG = [sys.executable, "-m", "app.cli.main"]
ADMIN_TENANT = "blackbox-admin"
LIMITED_TIER, LIMIT = "basic", 20
WORKERS = 2


def serve_environment(data_dir: Path, redis_url: str, secret: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {
        **clean,
        "RAG_DATA_DIR": str(data_dir),
        "RAG_REDIS_URL": redis_url,
        "RAG_JWT_SECRET": secret,
        "RAG_EMBEDDING_PROVIDER": "local",
        "RAG_RATE_LIMIT_TIERS": json.dumps(
            {LIMITED_TIER: LIMIT, "pro": 1000, "enterprise": 1_000_000}
        ),
        "HF_HUB_OFFLINE": "1",
    }


@contextmanager
def started_service(redis_url: str) -> Iterator[Target]:
    """`rag serve --workers 2` on a free port until the block ends (then Ctrl-C, as a user)."""
    with scratch_directory("rag-blackbox-") as data_dir:
        secret = secrets.token_urlsafe(48)
        env = serve_environment(data_dir, redis_url, secret)
        port = free_port()
        log = (data_dir / "serve.log").open("wb")
        server = subprocess.Popen(
            [*RAG, "serve", "--port", str(port), "--workers", str(WORKERS)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            if not wait_healthy(f"{url}/readyz", timeout=600):
                tail = (data_dir / "serve.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"rag serve did not become ready; its log ends:\n{tail}")
            # the first tenant cannot come from the admin API (its token needs an active tenant)
            subprocess.run(
                [*RAG, "tenant", "create", ADMIN_TENANT, "--tier", "enterprise"],
                env=env,
                check=True,
                capture_output=True,
                timeout=300,
            )
            yield Target(
                url=url,
                mint=secret_minter(secret),
                admin_tenant=ADMIN_TENANT,
                limited_tier=LIMITED_TIER,
            )
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=120)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            log.close()
