"""Job callbacks: a job's end POSTed to its `callback_url`, signed as Standard Webhooks say
(verified by the reference library), retried with backoff, across restarts, and refused at
submission when it would go to a private address or the service cannot sign it."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr
from sqlalchemy import text
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.db.tenancy import SessionMaker, tenant_transaction
from app.settings import Settings
from app.webhooks import signed_headers
from tests.conftest import TenantClient, app_client, new_tenant
from tests.fakes import WordHashEmbedder
from tests.jobs.conftest import finished, job_state, wait_for, workers
from tests.jobs.test_jobs_api import files, submit
from tests.webhooks.receiver import Receiver, receiving

pytestmark = pytest.mark.on_citus

SECRET = "whsec_" + base64.b64encode(b"a test secret of 32 bytes long!!").decode()
DOCUMENTS = [{"title": "Tides", "content": "Tides rise twice a day.", "external_id": "tides"}]


@pytest.fixture
def hooked(settings: Settings) -> Settings:
    """The service with callbacks on: loopback allowed, retries within a second or so."""
    return settings.model_copy(
        update={
            "webhook_secret": SecretStr(SECRET),
            "webhook_allowed_hosts": ["127.0.0.1"],
            "webhook_retry_base_seconds": 0.2,
            "webhook_retry_max_delay_seconds": 1.0,
            "webhook_timeout_seconds": 5.0,
        }
    )


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving(SECRET, [500, 500, 204]) as found:
        yield found


async def callback_state(
    tenant: TenantClient, job_id: str, *wanted: str, attempts: int = 0
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        callback: dict[str, Any] | None = (await job_state(tenant, job_id))["callback"]
        assert callback is not None
        if callback["status"] in wanted and callback["attempts"] >= attempts:
            return callback
        return None

    return await wait_for(check)


def payload(receiver: Receiver, index: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(receiver.received[index].body)
    return body


async def test_a_callback_is_retried_until_accepted_and_every_attempt_is_signed(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder, receiver: Receiver
) -> None:
    before = {outcome: attempts_counted(outcome) for outcome in ("delivered", "retry")}
    async with app_client(hooked, committed, embedder) as http:
        tenant = await new_tenant(http, hooked, committed)
        body = {"documents": DOCUMENTS, "callback_url": receiver.url}
        job_id = await submit(tenant, json=body)
        waiting = (await job_state(tenant, job_id))["callback"]
        assert waiting == {
            "url": receiver.url,
            "status": "waiting",
            "attempts": 0,
            "last_error": None,
            "next_attempt_at": None,
            "delivered_at": None,
        }
        async with workers(hooked, committed, embedder):
            callback = await callback_state(tenant, job_id, "delivered")
        state = await job_state(tenant, job_id)
    assert state["status"] == "succeeded"
    assert callback["attempts"] == 3
    assert callback["last_error"] is None
    assert callback["delivered_at"] is not None
    assert [r.answered for r in receiver.received] == [500, 500, 204]
    assert all(r.verified for r in receiver.received)  # the reference library's verdict
    assert {r.headers["webhook-id"] for r in receiver.received} == {job_id}
    assert len({r.body for r in receiver.received}) == 1  # the same message each time
    message = payload(receiver)
    assert message["type"] == "job.succeeded"
    assert message["data"]["job_id"] == job_id
    assert message["data"]["progress"]["documents_done"] == 1
    assert attempts_counted("retry") - before["retry"] == 2
    assert attempts_counted("delivered") - before["delivered"] == 1


def attempts_counted(outcome: str) -> float:
    value = REGISTRY.get_sample_value("rag_job_callback_attempts_total", {"outcome": outcome})
    return value or 0.0


async def test_the_reference_verifier_refuses_a_replay_and_a_stale_timestamp(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    with receiving(SECRET, [204]) as receiver:
        async with app_client(hooked, committed, embedder) as http:
            tenant = await new_tenant(http, hooked, committed)
            job_id = await submit(
                tenant, json={"documents": DOCUMENTS, "callback_url": receiver.url}
            )
            async with workers(hooked, committed, embedder):
                await callback_state(tenant, job_id, "delivered")
    [delivered] = receiver.received
    assert delivered.verified
    assert not receiver.verify(delivered.body, delivered.headers)  # the same id again
    stale = signed_headers(
        SECRET, message_id="another", timestamp=int(time.time()) - 600, body=delivered.body
    )
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(delivered.body, stale)
    fresh = signed_headers(
        SECRET, message_id="another", timestamp=int(time.time()), body=delivered.body
    )
    Webhook(SECRET).verify(delivered.body, fresh)  # our signature is the reference one
    tampered = delivered.body.replace(b"succeeded", b"failed")
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(tampered, {**fresh})


PRIVATE = [
    "https://10.0.0.1/hook",
    "https://192.168.1.20:8443/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://[::1]/hook",
    "https://[::ffff:10.0.0.1]/hook",
    "https://[::7f00:1]/hook",  # IPv4-compatible 127.0.0.1
    "https://[::ffff:0:7f00:1]/hook",  # IPv4-translated 127.0.0.1
    "https://[64:ff9b::7f00:1]/hook",  # NAT64 127.0.0.1
    "https://[64:ff9b:1::a00:1]/hook",  # local-use NAT64 10.0.0.1
    "https://[2002:a9fe:a9fe::]/latest/meta-data",  # 6to4 169.254.169.254
    "https://[2001:0:808:808::80ff:fffe]/hook",  # Teredo, client 127.0.0.1
    "https://localhost/hook",  # a name resolving to loopback, not listed
    "http://127.0.0.2/hook",  # not the listed host
    "ftp://files.example/hook",
    "https://user:password@127.0.0.1/hook",
    "not a url",
]


async def queued_entries(committed: SessionMaker) -> int:
    async with committed() as session:
        count = await session.scalar(text("select count(*) from procrastinate_jobs"))
    return int(count or 0)


async def test_a_callback_to_a_private_address_is_refused_at_submission(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with app_client(hooked, committed, embedder) as http:
        tenant = await new_tenant(http, hooked, committed)
        before = await queued_entries(committed)
        for url in PRIVATE:
            as_json = await http.post(
                "/api/rag/jobs",
                headers=tenant.headers,
                json={"documents": DOCUMENTS, "callback_url": url},
            )
            as_form = await http.post(
                "/api/rag/jobs",
                headers=tenant.headers,
                files=files(1),
                data={"callback_url": url},
            )
            for reply in (as_json, as_form):
                assert reply.status_code == 422, (url, reply.text)
                assert reply.headers["content-type"].startswith("application/problem+json")
                problem = reply.json()
                assert problem["detail"].startswith("callback_url: ")
                assert problem["errors"][0]["field"] == "callback_url"
        listed = await http.get("/api/rag/jobs", headers=tenant.headers)
        assert listed.json()["total"] == 0
        assert await queued_entries(committed) == before


UNSENDABLE = {
    "nul": "http://127.0.0.1:18791/ok\x00",
    "nul in the host": "http://127.0.0.1\x00.example:18791/ok",
    "cr lf": "http://127.0.0.1:18791/ok\r\nX-Injected: 1",
    "lf": "http://127.0.0.1:18791/o\nk",
    "tab": "http://127.0.0.1:18791/o\tk",
    "space": "http://127.0.0.1:18791/o k",
    "no-break space": "http://127.0.0.1:18791/o\u00a0k",
    "delete": "http://127.0.0.1:18791/o\x7fk",
    "c1 control": "http://127.0.0.1:18791/o\x85k",
    "surrogate": "http://127.0.0.1:18791/o\ud800k",
}


@pytest.mark.parametrize("kind", sorted(UNSENDABLE))
async def test_a_callback_url_that_can_never_be_sent_is_a_422_at_submission(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder, kind: str
) -> None:
    """Control characters (NUL included) and spaces: refused with a problem naming the field,
    through JSON and multipart alike, never stored (NUL once failed the insert: a 500)."""
    url = UNSENDABLE[kind]
    async with app_client(hooked, committed, embedder) as http:
        tenant = await new_tenant(http, hooked, committed)
        before = await queued_entries(committed)
        as_json = await http.post(
            "/api/rag/jobs",
            headers={**tenant.headers, "content-type": "application/json"},
            content=json.dumps({"documents": DOCUMENTS, "callback_url": url}),
        )
        replies = [as_json]
        if kind != "surrogate":  # a form field is UTF-8: it cannot carry a lone surrogate
            as_form = await http.post(
                "/api/rag/jobs", headers=tenant.headers, files=files(1), data={"callback_url": url}
            )
            replies.append(as_form)
        for reply in replies:
            assert reply.status_code == 422, (kind, reply.text)
            assert reply.headers["content-type"].startswith("application/problem+json")
            problem = reply.json()
            assert problem["errors"][0]["field"] == "callback_url"
            assert "control character or space" in problem["detail"], problem
        listed = await http.get("/api/rag/jobs", headers=tenant.headers)
        assert listed.json()["total"] == 0
        assert await queued_entries(committed) == before


async def test_without_a_secret_a_callback_is_refused_with_a_clear_problem(
    settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    assert settings.webhook_secret is None
    loopback = settings.model_copy(update={"webhook_allowed_hosts": ["127.0.0.1"]})
    async with app_client(loopback, committed, embedder) as http:
        tenant = await new_tenant(http, loopback, committed)
        reply = await http.post(
            "/api/rag/jobs",
            headers=tenant.headers,
            json={"documents": DOCUMENTS, "callback_url": "http://127.0.0.1:9/hook"},
        )
        assert reply.status_code == 422
        assert "RAG_WEBHOOK_SECRET" in reply.json()["detail"]
        assert reply.json()["errors"][0]["field"] == "callback_url"
        listed = await http.get("/api/rag/jobs", headers=tenant.headers)
        assert listed.json()["total"] == 0


async def test_pending_callbacks_survive_a_restart_of_the_service(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """The attempts are rows and queue entries, not memory: a new app on the same database
    (its own in-process workers) delivers what the stopped one had not."""
    serving = hooked.model_copy(update={"job_workers": 1})
    with receiving(SECRET, [503]) as receiver:
        async with app_client(serving, committed, embedder) as http:
            tenant = await new_tenant(http, serving, committed)
            job_id = await submit(
                tenant, json={"documents": DOCUMENTS, "callback_url": receiver.url}
            )
            before = await callback_state(tenant, job_id, "pending", attempts=2)
        assert before["last_error"].startswith("HTTP 503")
        assert before["next_attempt_at"] is not None
        made = len(receiver.received)
        receiver.statuses = [204]
        async with app_client(serving, committed, embedder) as http:
            tenant = TenantClient(http, tenant.tenant_id, tenant.headers)
            after = await callback_state(tenant, job_id, "delivered")
    assert after["attempts"] == len(receiver.received) > made >= 2
    assert receiver.received[-1].answered == 204
    assert all(r.verified for r in receiver.received)
    assert {r.headers["webhook-id"] for r in receiver.received} == {job_id}


async def test_cancelled_and_failed_jobs_call_back_too(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    bad = [("files", ("image.png", b"\x89PNG\r\n\x1a\n\x00\x00binary", "image/png"))]
    with receiving(SECRET, [204]) as receiver:
        async with app_client(hooked, committed, embedder) as http:
            tenant = await new_tenant(http, hooked, committed)
            cancelled = await submit(tenant, files=files(2), data={"callback_url": receiver.url})
            reply = await http.delete(f"/api/rag/jobs/{cancelled}", headers=tenant.headers)
            assert reply.json()["callback"]["status"] == "pending"
            failed = await submit(tenant, files=bad, data={"callback_url": receiver.url})
            async with workers(hooked, committed, embedder):
                assert (await finished(tenant, failed))["status"] == "failed"
                await callback_state(tenant, cancelled, "delivered")
                await callback_state(tenant, failed, "delivered")
    by_job = {r.headers["webhook-id"]: json.loads(r.body) for r in receiver.received}
    assert by_job[cancelled]["type"] == "job.cancelled"
    assert by_job[failed]["type"] == "job.failed"
    assert by_job[failed]["data"]["progress"]["documents_failed"] == 1


async def test_a_callback_is_given_up_after_its_retry_window(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    brief = hooked.model_copy(update={"webhook_retry_window_seconds": 1.0})
    with receiving(SECRET, [500]) as receiver:
        async with app_client(brief, committed, embedder) as http:
            tenant = await new_tenant(http, brief, committed)
            job_id = await submit(
                tenant, json={"documents": DOCUMENTS, "callback_url": receiver.url}
            )
            async with workers(brief, committed, embedder):
                callback = await callback_state(tenant, job_id, "failed")
    assert callback["attempts"] == len(receiver.received) >= 2
    assert callback["last_error"].startswith("HTTP 500")
    assert callback["next_attempt_at"] is None


async def test_each_delivery_checks_the_address_again(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """A host allowed at submission and no longer at delivery, whose name resolves to a
    loopback address, is not called: each attempt resolves and checks again, saying why."""
    opened = hooked.model_copy(update={"webhook_allowed_hosts": ["localhost"]})
    closed = hooked.model_copy(
        update={"webhook_allowed_hosts": [], "webhook_retry_window_seconds": 0.5}
    )
    with receiving(SECRET, [204]) as receiver:
        url = receiver.url.replace("http://127.0.0.1", "https://localhost")
        async with app_client(opened, committed, embedder) as http:
            tenant = await new_tenant(http, opened, committed)
            job_id = await submit(tenant, json={"documents": DOCUMENTS, "callback_url": url})
            async with workers(closed, committed, embedder):
                callback = await callback_state(tenant, job_id, "failed")
    assert receiver.received == []
    assert "resolves to" in callback["last_error"]
    assert "loopback" in callback["last_error"]


# what a text column can hold: neither NUL nor a lone surrogate
STORED_UNSENDABLE = {k: v for k, v in UNSENDABLE.items() if "nul" not in k and k != "surrogate"}


@pytest.mark.parametrize("kind", sorted(STORED_UNSENDABLE))
async def test_a_stored_callback_url_that_can_never_be_sent_fails_at_once(
    hooked: Settings, committed: SessionMaker, embedder: WordHashEmbedder, kind: str
) -> None:
    """A URL stored before submission checked its characters (as the database holds it): its
    first attempt gives it up with the reason, instead of retrying it for the whole window
    (24 hours by default)."""
    with receiving(SECRET, [204]) as receiver:
        async with app_client(hooked, committed, embedder) as http:
            tenant = await new_tenant(http, hooked, committed)
            job_id = await submit(
                tenant, json={"documents": DOCUMENTS, "callback_url": receiver.url}
            )
            async with tenant_transaction(committed, tenant.tenant_id) as session:
                await session.execute(
                    text(
                        "update ingest_jobs set callback_url = :url"
                        " where tenant_id = :tenant and id = :id"  # routed on Citus
                    ),
                    {"url": STORED_UNSENDABLE[kind], "tenant": tenant.tenant_id, "id": job_id},
                )
            async with workers(hooked, committed, embedder):
                callback = await callback_state(tenant, job_id, "failed")
    assert receiver.received == []
    assert callback["attempts"] == 1
    assert callback["next_attempt_at"] is None
    assert callback["last_error"].startswith("can never be sent:"), callback
    assert "control character or space" in callback["last_error"]
