"""The embedded server runs with the service's settings (app/db/tuning.py), sized to the
machine, applied by a restart on first start and kept across restarts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psutil
import pytest

from app.db.embedded import TUNING_FILE, start_embedded
from app.db.tuning import FIXED, embedded_tuning, memory_bytes, shared_buffers_mb
from tests.conftest import DatabaseUrls
from tests.processes import scratch_directory

GB = 2**30
needs_embedded = pytest.mark.skipif(
    "RAG_TEST_DATABASE_URL" in os.environ, reason="tests run against an external server"
)


async def settings_of(url: str, names: list[str]) -> dict[str, str]:
    """Each setting as the server reads it: sizes in bytes, so 8192MB and 8GB compare equal."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "select name, case when unit in ('8kB', 'kB') then"
            " pg_size_bytes(current_setting(name))::text else current_setting(name) end as value"
            " from pg_settings where name = any($1)",
            names,
        )
        return {row["name"]: row["value"] for row in rows}
    finally:
        await conn.close()


def as_read(tuning: dict[str, str]) -> dict[str, str]:
    sizes = {"shared_buffers", "maintenance_work_mem"}
    return {
        name: str(int(value.removesuffix("MB")) * 2**20) if name in sizes else value
        for name, value in tuning.items()
    }


@needs_embedded
async def test_the_session_server_runs_with_the_tuning_sized_to_this_machine(
    database: DatabaseUrls,
) -> None:
    tuning = embedded_tuning()
    assert tuning["shared_buffers"] == f"{shared_buffers_mb(memory_bytes())}MB"
    assert await settings_of(database.superuser_url, list(tuning)) == as_read(tuning)


@pytest.fixture
def pgdata() -> Iterator[Path]:
    with scratch_directory("rag-test-tuning-") as directory:
        yield directory / "pgdata"


@needs_embedded
async def test_a_changed_tuning_is_applied_by_one_restart_and_kept(pgdata: Path) -> None:
    tuning = embedded_tuning(shared_buffers=64)
    server = start_embedded(pgdata, tuning=tuning)
    try:
        url = server.url(user="postgres", database="postgres")
        assert (await settings_of(url, ["shared_buffers"]))["shared_buffers"] == str(64 * 2**20)
    finally:
        server.stop()
    assert (pgdata / TUNING_FILE).read_text().count("shared_buffers") == 1
    again = start_embedded(pgdata, delete_on_exit=True, tuning=tuning)
    try:
        url = again.url(user="postgres", database="postgres")
        assert (await settings_of(url, ["shared_buffers"]))["shared_buffers"] == str(64 * 2**20)
        conf = (pgdata / "postgresql.conf").read_text()
        assert conf.count(TUNING_FILE) == 1  # included once, however many starts
    finally:
        again.stop()


@pytest.mark.parametrize(
    ("memory", "expected_mb"),
    [
        (24 * GB, 6144),  # a quarter
        (int(23.4 * GB), 5888),  # in steps of 128MB, rounded down
        (2 * GB, 512),
        (256 * 2**20, 128),  # never under initdb's 128MB
        (512 * GB, 16_384),  # past 64GB the page cache serves as well
    ],
)
def test_shared_buffers_are_a_quarter_of_the_memory_within_bounds(
    memory: int, expected_mb: int
) -> None:
    assert shared_buffers_mb(memory) == expected_mb


def test_a_containers_memory_limit_sizes_the_buffers(tmp_path: Path) -> None:
    machine = psutil.virtual_memory().total
    assert memory_bytes(tmp_path) == machine  # no cgroup files: the machine's memory
    (tmp_path / "memory.max").write_text("max\n")  # cgroup v2, no limit
    assert memory_bytes(tmp_path) == machine
    (tmp_path / "memory.max").write_text(f"{GB}\n")  # cgroup v2, a 1GB container
    assert memory_bytes(tmp_path) == GB
    (tmp_path / "memory.max").unlink()
    (tmp_path / "memory").mkdir()
    unlimited = "9223372036854771712\n"  # cgroup v1's "no limit"
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(unlimited)
    assert memory_bytes(tmp_path) == machine
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{2 * GB}\n")
    assert memory_bytes(tmp_path) == 2 * GB


def test_a_set_size_replaces_the_sized_one_and_the_rest_stays() -> None:
    assert embedded_tuning(shared_buffers=300) == {"shared_buffers": "300MB", **FIXED}
