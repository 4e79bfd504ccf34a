"""No token, secret, query text or document text in the logs: traffic full
of them through the app in this process (served on a socket) and through `rag serve
--verbose` as its own process, every line captured, none of them found."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from app.auth import issue_token
from app.settings import Settings
from tests.api.live import _register, in_thread, live_server
from tests.conftest import APP_PASSWORD, JWT_SECRET, DatabaseUrls
from tests.embeddings.fakes import FakeOpenAI
from tests.observability.conftest import CapturedLogs
from tests.observability.serve import OPENAI_KEY, serve, serve_env

QUERY = "quokka7f3a crystalline harbour"
TITLE = "Okapi55 ledger"
CONTENT = "The zebracorn91b2 ledger lists every harbour shipment of crystalline salt."
METADATA = "narwhal3c-meta"
EXTERNAL_ID = "ibex2a-external"
UPLOAD = "axolotl5d upload body about the crystalline harbour"
MCP_QUERY = "pangolin8e harbour"
COLLECTION = "lemur4b-collection"
TEXTS = [QUERY, "quokka7f3a", TITLE, "zebracorn91b2", METADATA, EXTERNAL_ID, "axolotl5d"]
TEXTS += [MCP_QUERY, "pangolin8e", COLLECTION]


def traffic(url: str, token: str) -> int:
    """Requests carrying the token, secrets and distinctive texts every way a client may send
    them, good and bad; returns how many got a reply through the app (an access line each)."""
    auth = {"Authorization": f"Bearer {token}"}
    tampered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    sent = 0
    with httpx.Client(base_url=url, timeout=60) as http:

        def call(method: str, path: str, **kwargs: object) -> httpx.Response:
            nonlocal sent
            sent += 1
            return http.request(method, path, **kwargs)  # type: ignore[arg-type]

        document = {
            "title": TITLE,
            "content": CONTENT,
            "external_id": EXTERNAL_ID,
            "collection": COLLECTION,
            "metadata": {"note": METADATA, "key": OPENAI_KEY},
            "source_url": f"https://example.com/{EXTERNAL_ID}?api_key={OPENAI_KEY}",
        }
        created = call("POST", "/api/rag/documents", json=document, headers=auth)
        assert created.status_code in (200, 201), created.text
        document_id = created.json()["document_id"]
        files = {"file": (f"{EXTERNAL_ID}.md", f"# {TITLE}\n\n{UPLOAD}\n".encode())}
        assert call("POST", "/api/rag/documents/upload", files=files, headers=auth).is_success
        for mode in ("vector", "keyword", "hybrid"):
            body = {"query": QUERY, "mode": mode, "collections": [COLLECTION]}
            assert call("POST", "/api/rag/search", json=body, headers=auth).status_code == 200
        context = {"query": QUERY, "style": "numbered"}
        assert call("POST", "/api/rag/context", json=context, headers=auth).status_code == 200
        similar = f"/api/rag/documents/{document_id}/similar"
        assert call("GET", similar, headers=auth).status_code == 200
        dedupe = {"dry_run": True}
        assert call("POST", "/api/rag/dedupe", json=dedupe, headers=auth).status_code == 200
        rpc = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search_similar", "arguments": {"query": MCP_QUERY}},
        }
        assert call("POST", "/mcp", json=rpc, headers=auth).status_code == 200
        # refused: bad tokens, secrets where tokens go, in paths and query strings
        assert call("GET", "/api/rag/documents", headers={"Authorization": f"Bearer {tampered}"})
        bare = {"Authorization": f"Bearer {OPENAI_KEY}"}
        assert call("GET", "/api/rag/documents", headers=bare).status_code == 401
        assert call("GET", f"/api/rag/documents?collection={COLLECTION}&token={token}").is_error
        assert call("GET", f"/api/rag/documents/{token}", headers=auth).is_error
        assert call("GET", f"/no/such/{OPENAI_KEY}/{QUERY}").status_code == 404
        too_many = {"query": QUERY, "max_results": 999}
        assert call("POST", "/api/rag/search", json=too_many, headers=auth).status_code == 422
        other = auth | {"X-Tenant-ID": f"{METADATA}-other"}
        assert call("GET", "/api/rag/documents", headers=other).status_code == 403
        odd_id = {"X-Request-ID": f"{OPENAI_KEY} {token}"}  # malformed: replaced, not logged
        assert call("GET", "/healthz", headers=odd_id).status_code == 200
        # a head too large is refused before the app (no access line)
        huge = auth | {"X-Padding": token * (70_000 // len(token) + 1)}
        assert http.get("/healthz", headers=huge).status_code == 431
    return sent


def assert_clean(logs: str, secrets: list[str]) -> None:
    lowered = logs.lower()
    for secret in secrets:
        assert secret.lower() not in lowered, f"{secret!r} found in the logs"


def secrets_of(token: str) -> list[str]:
    signature = token.rsplit(".", 1)[1]
    return [token, signature, JWT_SECRET, APP_PASSWORD, OPENAI_KEY, *TEXTS]


def test_the_app_logs_none_of_them(settings: Settings, service_logs: CapturedLogs) -> None:
    keyed = settings.model_copy(update={"openai_api_key": SecretStr(OPENAI_KEY)})
    with live_server(keyed) as live:
        sent = traffic(live.url, live.token)
    assert len(service_logs.access()) >= sent  # the lines are there...
    assert_clean(service_logs.text(), secrets_of(live.token))  # ...without any of them


def test_rag_serve_logs_none_of_them(
    settings: Settings,
    database: DatabaseUrls,
    openai_server: tuple[FakeOpenAI, str],
    tmp_path: Path,
) -> None:
    """The real process, with --verbose, on a database URL with a password and the OpenAI
    provider with its key."""
    fake, url = openai_server
    fake.reset()
    fake.api_key = OPENAI_KEY
    tenant = f"t-secrets-{uuid.uuid4().hex[:8]}"
    in_thread(_register(settings, tenant))
    env = serve_env(
        tmp_path,
        url,
        RAG_DATABASE_URL=database.app_url,
        RAG_REDIS_URL=str(settings.redis_url),
        RAG_JWT_SECRET=JWT_SECRET,
        RAG_MCP_ALLOWED_HOSTS="127.0.0.1:*",
    )
    served = serve(env, tmp_path / "serve.log", "--verbose")
    try:
        token = issue_token(
            settings,
            tenant_id=tenant,
            subject="secrets",
            scopes=["rag:search", "rag:ingest"],
            ttl_seconds=600,
        )
        sent = traffic(served.url, token)
    finally:
        assert served.stop() == 0
    lines = served.lines()
    assert all(json.dumps(line) for line in lines)
    access = [line for line in lines if line.get("logger") == "app.access"]
    assert len(access) >= sent
    assert any(str(line.get("message", "")).startswith("database: ") for line in lines)
    refused = [line for line in lines if line.get("status") == 431]
    assert len(refused) == 1
    assert "request_id" in refused[0]
    assert_clean(served.text(), secrets_of(token))


@pytest.fixture(autouse=True)
def _fresh_fake(openai_server: tuple[FakeOpenAI, str]) -> None:
    openai_server[0].reset()
