"""The service under test, seen from outside: a base URL and a way to mint tokens.

This suite talks HTTP only and imports nothing from `app/` (test_imports.py checks it), so it
runs the same against `rag serve` on this machine and against a deployed stack:

    RAG_BLACKBOX_URL=http://localhost:8000       # the proxy of docker-compose.yml
    RAG_BLACKBOX_JWT_SECRET=...                  # the stack's RAG_JWT_SECRET (HS256), or
    RAG_BLACKBOX_TOKEN_COMMAND='docker compose exec -T app1 rag token --tenant {tenant} \
        --scopes "{scopes}"'                     # a command printing a token
    RAG_BLACKBOX_ADMIN_TENANT=blackbox-admin     # an active tenant (`rag tenant create`)
    RAG_BLACKBOX_LIMITED_TIER=basic              # the tier the rate-limit test exhausts
    RAG_BLACKBOX_TIER=enterprise                 # the other test tenants' (a roomy one)

Optional: RAG_BLACKBOX_JWT_AUDIENCE, RAG_BLACKBOX_JWT_ISSUER, RAG_BLACKBOX_JWT_TENANT_CLAIM
(when the service checks them). Without RAG_BLACKBOX_URL, conftest.py starts `rag serve`.
"""

from __future__ import annotations

import shlex
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx
from jose import jwt

SEARCH_SCOPES = "rag:search rag:ingest"
ADMIN_SCOPES = "rag:admin rag:search rag:ingest"
# Reads right after a write ask for the primary: a read replica may not have the write yet.
READ_PRIMARY = {"X-Read-Consistency": "primary"}
TIMEOUT = httpx.Timeout(60.0)

Minter = Callable[[str, str], str]  # (tenant, scopes) -> token


def secret_minter(
    secret: str,
    *,
    audience: str | None = None,
    issuer: str | None = None,
    tenant_claim: str = "tenant_id",
) -> Minter:
    """HS256 tokens signed with the service's RAG_JWT_SECRET, the claims it reads."""

    def mint(tenant: str, scopes: str) -> str:
        now = int(time.time())
        claims: dict[str, object] = {
            tenant_claim: tenant,
            "sub": "blackbox",
            "scope": scopes,
            "iat": now,
            "exp": now + 3600,
        }
        if audience is not None:
            claims["aud"] = audience
        if issuer is not None:
            claims["iss"] = issuer
        token: str = jwt.encode(claims, secret, algorithm="HS256")
        return token

    return mint


def command_minter(template: str) -> Minter:
    """A command printing a token, with {tenant} and {scopes} filled in (shell-quoted)."""

    def mint(tenant: str, scopes: str) -> str:
        command = template.format(tenant=shlex.quote(tenant), scopes=scopes)
        done = subprocess.run(
            command, shell=True, capture_output=True, text=True, check=True, timeout=120
        )
        return done.stdout.strip().splitlines()[-1]

    return mint


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    mint: Minter
    admin_tenant: str
    limited_tier: str = "basic"
    tier: str = "enterprise"

    def client(self, token: str | None = None, *, keep_alive: bool = True) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        limits = httpx.Limits(max_keepalive_connections=None if keep_alive else 0)
        return httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT, limits=limits)

    def new_tenant(self, prefix: str, *, tier: str | None = None) -> Tenant:
        """A fresh tenant made through the admin API, and a client carrying its token."""
        tenant_id = f"bb-{prefix}-{uuid.uuid4().hex[:10]}"
        tier = tier or self.tier
        with self.client(self.mint(self.admin_tenant, ADMIN_SCOPES)) as admin:
            made = admin.post("/api/admin/tenants", json={"id": tenant_id, "tier": tier})
            assert made.status_code == 201, made.text
        token = self.mint(tenant_id, SEARCH_SCOPES)
        return Tenant(tenant_id, token, self.client(token))


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    token: str
    http: httpx.Client

    def ingest(self, title: str, content: str, **fields: object) -> dict[str, object]:
        body = {"title": title, "content": content, "source_type": "markdown", **fields}
        reply = self.http.post("/api/rag/documents", json=body)
        assert reply.status_code in (200, 201), reply.text
        result: dict[str, object] = reply.json()
        return result

    def search(self, query: str, *, primary: bool = True, **body: object) -> httpx.Response:
        headers = READ_PRIMARY if primary else {}
        return self.http.post("/api/rag/search", json={"query": query, **body}, headers=headers)


def target_from_environment(environ: Mapping[str, str]) -> Target | None:
    """The deployed service the environment names, or None (conftest starts one)."""
    url = environ.get("RAG_BLACKBOX_URL")
    if not url:
        return None
    if command := environ.get("RAG_BLACKBOX_TOKEN_COMMAND"):
        mint = command_minter(command)
    elif secret := environ.get("RAG_BLACKBOX_JWT_SECRET"):
        mint = secret_minter(
            secret,
            audience=environ.get("RAG_BLACKBOX_JWT_AUDIENCE"),
            issuer=environ.get("RAG_BLACKBOX_JWT_ISSUER"),
            tenant_claim=environ.get("RAG_BLACKBOX_JWT_TENANT_CLAIM", "tenant_id"),
        )
    else:
        raise RuntimeError(
            "RAG_BLACKBOX_URL is set: set RAG_BLACKBOX_JWT_SECRET or RAG_BLACKBOX_TOKEN_COMMAND"
        )
    return Target(
        url=url.rstrip("/"),
        mint=mint,
        admin_tenant=environ.get("RAG_BLACKBOX_ADMIN_TENANT", "blackbox-admin"),
        limited_tier=environ.get("RAG_BLACKBOX_LIMITED_TIER", "basic"),
        tier=environ.get("RAG_BLACKBOX_TIER", "enterprise"),
    )
