"""Access lists through the client and the command line: `rag token --groups`, `rag ingest
--access`, the client's `access` fields and `update_document`, against the live service."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rag_client import AsyncRagClient, Invalid, NotFound, RagClient

from tests.cli.imports import run_rag
from tests.client.conftest import LiveService
from tests.conftest import JWT_SECRET


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {**clean, "RAG_JWT_SECRET": JWT_SECRET, "RAG_DATA_DIR": str(tmp_path), "COLUMNS": "200"}


def _token(env: dict[str, str], tenant: str, *extra: str) -> str:
    made = run_rag("token", "--tenant", tenant, *extra, env=env)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def test_cli_tokens_carry_groups_and_ingest_sets_access(
    live: LiveService, env: dict[str, str], tmp_path: Path
) -> None:
    tenant = live.tenant()
    hr = _token(env, tenant, "--subject", "carol", "--groups", "hr,legal")
    outsider = _token(env, tenant, "--subject", "bob")
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "pay.md").write_text("# Pay\n\nSalary bands are reviewed in March.\n")
    sent = run_rag(
        "ingest", str(folder), "--url", live.url, "--token", hr, "--access", "group:hr", env=env
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr
    with RagClient(live.url, hr) as rag:
        [document] = list(rag.iter_documents())
    assert document.access == ["group:hr"]
    with RagClient(live.url, outsider) as rag:
        assert list(rag.iter_documents()) == []
        with pytest.raises(NotFound):
            rag.get_document(document.document_id)

    refused = run_rag(
        "ingest", str(folder), "--url", live.url, "--token", hr, "--access", "hr", env=env
    )
    assert refused.returncode == 2
    assert "--access" in refused.stderr
    bad = run_rag("token", "--tenant", tenant, "--groups", "hr," + "x" * 200, env=env)
    assert bad.returncode == 2
    assert "--groups" in bad.stderr


def test_the_client_sets_and_changes_access(live: LiveService, env: dict[str, str]) -> None:
    tenant = live.tenant()
    hr = _token(env, tenant, "--subject", "carol", "--groups", "hr")
    legal = _token(env, tenant, "--subject", "dan", "--groups", "legal")
    with RagClient(live.url, hr) as rag, RagClient(live.url, legal) as other:
        made = rag.ingest("Salary bands are reviewed in March.", access=["group:hr"])
        assert made.access == ["group:hr"]
        with pytest.raises(NotFound):
            other.get_document(made.document_id)
        with pytest.raises(Invalid):
            rag.ingest("Board minutes.", access=["group:board"])
        changed = rag.update_document(made.document_id, access=["group:hr", "group:legal"])
        assert changed.access == ["group:hr", "group:legal"]
        assert other.get_document(made.document_id).access == ["group:hr", "group:legal"]
        opened = other.update_document(made.document_id, access=[], metadata={"team": "pay"})
        assert opened.access == []
        assert opened.metadata == {"team": "pay"}


async def test_the_async_client_changes_access(live: LiveService, env: dict[str, str]) -> None:
    tenant = live.tenant()
    hr = _token(env, tenant, "--subject", "carol", "--groups", "hr")
    async with AsyncRagClient(live.url, hr) as rag:
        made = await rag.ingest("Salary bands.", access=["user:carol"])
        changed = await rag.update_document(made.document_id, access=["group:hr"])
        assert changed.access == ["group:hr"]
