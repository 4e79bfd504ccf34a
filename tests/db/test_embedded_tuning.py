"""The embedded server runs with the service's settings (app/db/embedded.py TUNING), applied by
a restart on first start and kept across restarts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import asyncpg
import pytest

from app.db.embedded import TUNING, TUNING_FILE, start_embedded
from tests.conftest import DatabaseUrls

pytestmark = pytest.mark.skipif(
    "RAG_TEST_DATABASE_URL" in os.environ, reason="tests run against an external server"
)


async def settings_of(url: str) -> dict[str, str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "select name, current_setting(name) as value from pg_settings where name = any($1)",
            list(TUNING),
        )
        return {row["name"]: row["value"] for row in rows}
    finally:
        await conn.close()


async def test_the_session_server_runs_with_the_tuning(database: DatabaseUrls) -> None:
    assert await settings_of(database.superuser_url) == dict(TUNING)


async def test_a_changed_tuning_is_applied_by_one_restart_and_kept() -> None:
    pgdata = Path(tempfile.mkdtemp(prefix="rag-test-tuning-")) / "pgdata"
    tuning = {**TUNING, "shared_buffers": "64MB"}
    server = start_embedded(pgdata, tuning=tuning)
    try:
        url = server.url(user="postgres", database="postgres")
        assert (await settings_of(url))["shared_buffers"] == "64MB"
    finally:
        server.stop()
    assert (pgdata / TUNING_FILE).read_text().count("shared_buffers") == 1
    again = start_embedded(pgdata, delete_on_exit=True, tuning=tuning)
    try:
        url = again.url(user="postgres", database="postgres")
        assert (await settings_of(url))["shared_buffers"] == "64MB"
        conf = (pgdata / "postgresql.conf").read_text()
        assert conf.count(TUNING_FILE) == 1  # included once, however many starts
    finally:
        again.stop()
