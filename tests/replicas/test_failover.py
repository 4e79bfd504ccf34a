"""A replica that dies, comes back, or is no standby at all: clients never see it fail."""

from __future__ import annotations

import asyncio
from collections import Counter

from tests.replicas.conftest import AppFactory, Replicated, ReplicatedApp, wait_for
from tests.standby import Standby, wait_until_replaying

TRAFFIC_WORKERS = 4


async def test_a_replica_dying_mid_request_is_retried_on_the_primary(
    replicated_app: AppFactory, standby: Standby
) -> None:
    # checks far apart: the replica dies between two of them, so reads still pick it
    async with replicated_app(check_seconds=60) as app:
        await app.ingest("Kites", "kites climb on the sea breeze")
        await app.caught_up()
        replicas = app.resources.replicas
        replica = replicas.replicas[0]
        assert await app.search("kites") == ["Kites"]  # the pool now holds replica sessions

        await asyncio.to_thread(standby.stop, "immediate")
        assert await app.search("kites") == ["Kites"]
        assert (replica.failed_reads, replicas.failovers) == (1, 1)
        assert not replica.state.healthy
        assert "failed a read" in (replica.state.reason or "")
        served = replica.served
        assert await app.search("kites") == ["Kites"]  # straight to the primary now
        assert (replica.served, replicas.failovers) == (served, 1)

        await asyncio.to_thread(standby.start)
        await asyncio.to_thread(wait_until_replaying, standby)
        await app.caught_up()
        assert await app.search("kites") == ["Kites"]
        assert replica.served == served + 1


async def test_traffic_moves_to_the_primary_when_the_replica_stops_and_back_when_it_returns(
    replicated_app: AppFactory, standby: Standby
) -> None:
    async with replicated_app(check_seconds=0.1) as app:
        await app.ingest("Lighthouse", "the lighthouse keeper trims the wick at dusk")
        await app.caught_up()
        replicas = app.resources.replicas
        replica = replicas.replicas[0]
        statuses: Counter[int] = Counter()
        stop = asyncio.Event()
        workers = [
            asyncio.create_task(_searching(app, statuses, stop)) for _ in range(TRAFFIC_WORKERS)
        ]
        try:
            await wait_for(lambda: replica.served >= 20)
            await asyncio.to_thread(standby.stop, "fast")  # ends the replica's sessions
            await wait_for(lambda: not replica.state.healthy)
            primary_before = replicas.primary_reads
            await wait_for(lambda: replicas.primary_reads >= primary_before + 20)
            ready = await app.http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["replicas"][0]["healthy"] is False

            await asyncio.to_thread(standby.start)
            await wait_for(lambda: replica.state.healthy)
            served = replica.served
            await wait_for(lambda: replica.served >= served + 20)
        finally:
            stop.set()
            await asyncio.gather(*workers)
        assert set(statuses) == {200}, statuses
        assert statuses[200] >= 60


async def _searching(app: ReplicatedApp, statuses: Counter[int], stop: asyncio.Event) -> None:
    """Searches one after another until `stop`; each reply's status is counted, and each 200
    must carry the document."""
    while not stop.is_set():
        reply = await app.http.post(
            "/api/rag/search",
            json={"query": "lighthouse", "mode": "keyword"},
            headers=app.headers,
        )
        statuses[reply.status_code] += 1
        if reply.status_code == 200:
            assert [c["title"] for c in reply.json()["chunks"]] == ["Lighthouse"]
        await asyncio.sleep(0)


async def test_a_server_that_is_not_a_standby_is_never_used(
    replicated_app: AppFactory, replicated: Replicated
) -> None:
    # the primary's own URL given as a replica: reading it would be harmless, but it says the
    # configuration is wrong (or the replica was promoted), so it is reported and skipped
    async with replicated_app(replica_url=replicated.app_url, check_seconds=0.1) as app:
        replica = app.resources.replicas.replicas[0]
        await wait_for(lambda: replica.state.checked_at is not None)
        assert not replica.state.healthy
        assert replica.state.reason == "not in recovery (not a standby)"
        await app.ingest("Owls", "owls hunt at night")
        assert await app.search("owls") == ["Owls"]
        assert replica.served == 0


async def test_a_replica_busy_with_reads_is_not_taken_for_one_that_does_not_answer(
    replicated_app: AppFactory,
) -> None:
    async with replicated_app(check_seconds=60, db_pool_size=2) as app:
        await app.caught_up()
        replica = app.resources.replicas.replicas[0]
        async with replica.engine.connect(), replica.engine.connect():  # its whole pool
            await app.resources.replicas.check(app.resources.engine)
            assert replica.state.healthy, replica.state
