"""`rag … --url` against the live service: the CLI as a client, in its own process, which
never imports torch, the model or the database layer (checked with `python -X importtime`)."""

from __future__ import annotations

import io
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from rag_client import DocumentReference, NewDocument, NotFound, RagClient
from rich.console import Console

from app.cli.options import Remote
from app.cli.remote import connect
from tests.api.test_upload import pdf_bytes
from tests.cli.imports import Run, run_rag
from tests.client.conftest import ADMIN_SCOPES, TINY_TIER, WEBHOOK_SECRET, LiveService
from tests.webhooks.receiver import receiving

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {**clean, "RAG_DATA_DIR": str(tmp_path / "nowhere"), "COLUMNS": "200"}


def _folder(root: Path) -> Path:
    folder = root / "kb"
    (folder / "sub").mkdir(parents=True)
    (folder / "volcanoes.md").write_text("# Volcanoes\n\nMagma erupts as lava from a volcano.\n")
    (folder / "sub" / "bread.txt").write_text("Knead the dough and bake the bread at 220 degrees.")
    (folder / ".hidden.txt").write_text("never sent")
    return folder


def _light(run: Run) -> Run:
    assert run.heavy() == [], run.heavy()
    assert "torch" not in run.modules
    return run


def test_ingest_search_context_list_show_delete(
    live: LiveService, env: dict[str, str], tmp_path: Path
) -> None:
    token = live.token(live.tenant())
    remote = ("--url", live.url, "--token", token)
    folder = _folder(tmp_path)
    (folder / "picture.txt").write_bytes(PNG)

    first = _light(run_rag("ingest", str(folder), *remote, env=env))
    assert first.returncode == 1, first.stderr  # the PNG failed, the others went
    assert "failed: picture.txt: " in first.stdout
    assert "PNG" in first.stdout
    assert "ingest summary" in first.stdout
    with RagClient(live.url, token) as rag:
        documents = {d.external_id: d for d in rag.iter_documents()}
    assert set(documents) == {"volcanoes.md", "sub/bread.txt"}  # relative, never absolute
    assert documents["volcanoes.md"].metadata == {"filename": "volcanoes.md"}

    (folder / "picture.txt").unlink()
    again = _light(run_rag("ingest", str(folder), *remote, env=env))
    assert again.returncode == 0, again.stderr
    assert "failed:" not in again.stdout
    assert "│     2 │      2 │        0 │         2 │      0 │" in again.stdout  # all unchanged

    by_env = {**env, "RAG_URL": live.url, "RAG_TOKEN": token}
    found = _light(run_rag("search", "lava eruption", "--max-results", "1", env=by_env))
    assert found.returncode == 0, found.stderr
    assert "Volcanoes" in found.stdout
    assert "Bread" not in found.stdout

    ranking = ("--mode", "hybrid", "--fusion", "rrf", "--ef-search", "50", "--diversity", "0.2")
    with RagClient(live.url, token) as rag:
        rrf = rag.search(
            "lava eruption", mode="hybrid", fusion="rrf", ef_search=50, diversity=0.2, max_results=1
        ).chunks[0]
        weighted = rag.search(
            "lava eruption", mode="hybrid", vector_weight=0.2, max_results=1
        ).chunks[0]
    assert rrf.score is not None
    assert weighted.score is not None
    fused = _light(run_rag("search", "lava eruption", *ranking, "--max-results", "1", env=by_env))
    assert fused.returncode == 0, fused.stderr
    assert f"{rrf.score:.4f}" in fused.stdout
    shared = ("search", "lava eruption", "--mode", "hybrid", "--vector-weight", "0.2")
    weighed = _light(run_rag(*shared, "--max-results", "1", env=by_env))
    assert f"{weighted.score:.4f}" in weighed.stdout

    # --rerank reaches the service, which has no reranker configured: refused, as over HTTP
    for command in ("search", "context"):
        refused = _light(run_rag(command, "lava eruption", "--rerank", env=by_env))
        assert refused.returncode == 2
        assert "rerank: no reranker is configured" in refused.stderr
        plain = _light(run_rag(command, "lava eruption", "--no-rerank", env=by_env))
        assert plain.returncode == 0, plain.stderr

    built = _light(run_rag("context", "lava eruption", "--max-results", "1", env=by_env))
    assert built.returncode == 0, built.stderr
    assert "lava" in built.stdout

    listed = _light(run_rag("documents", "list", env=by_env))
    assert "sub/bread.txt" in listed.stdout
    volcano = str(documents["volcanoes.md"].document_id)
    shown = _light(run_rag("documents", "show", volcano, env=by_env))
    assert "volcanoes.md" in shown.stdout
    deleted = _light(run_rag("documents", "delete", volcano, env=by_env))
    assert deleted.returncode == 0, deleted.stderr
    with RagClient(live.url, token) as rag, pytest.raises(NotFound):
        rag.get_document(volcano)
    gone = _light(run_rag("documents", "delete", volcano, env=by_env))
    assert gone.returncode == 2
    assert "does not exist" in gone.stderr


def test_sync_mirrors_a_folder_and_deletes_what_was_removed(
    live: LiveService, env: dict[str, str], tmp_path: Path
) -> None:
    token = live.token(live.tenant())
    remote = ("--url", live.url, "--token", token)
    folder = _folder(tmp_path)
    (folder / "manual.pdf").write_bytes(pdf_bytes(("Sulfur vents hiss on the crater rim.",)))
    mirror = ("sync", str(folder), "--collection", "kb", *remote)
    first = _light(run_rag(*mirror, env=env))
    assert first.returncode == 0, first.stderr
    assert "kb: send 3 new or changed files, 0 unchanged, delete 0" in first.stdout

    (folder / "volcanoes.md").write_text("# Volcanoes\n\nLava cools into basalt.\n")
    (folder / "sub" / "bread.txt").unlink()
    (folder / "tea.md").write_text("# Tea\n\nSteep green tea at 80 degrees.\n")
    dry = _light(run_rag(*mirror, "--dry-run", env=env))
    assert dry.returncode == 0, dry.stderr
    assert "would send 2 new or changed files, 1 unchanged, would delete 1" in dry.stdout
    refused = _light(run_rag(*mirror, "--max-deletions", "0", env=env))
    assert refused.returncode == 2
    assert "more than max_deletions allows (0); nothing was changed" in refused.stderr
    done = _light(run_rag(*mirror, env=env))
    assert done.returncode == 0, done.stderr
    assert "kb: send 2 new or changed files, 1 unchanged, delete 1" in done.stdout
    assert "  - sub/bread.txt" in done.stdout
    receipt_id = done.stdout.split("receipt ")[1].split()[0]

    with RagClient(live.url, token) as rag:
        stored = {d.external_id: d for d in rag.iter_documents(collection="kb")}
        receipt: dict[str, Any] = rag.receipt(receipt_id)
    assert set(stored) == {"volcanoes.md", "tea.md", "manual.pdf"}
    assert all(str(d.version).startswith("sha256:") for d in stored.values())
    assert receipt["kind"] == "sync"
    assert [d["external_id"] for d in receipt["deleted"]] == ["sub/bread.txt"]
    assert receipt["erased"]["gone"] is True


def test_the_client_runs_a_sync_in_the_background(live: LiveService) -> None:
    token = live.token(live.tenant())
    first = [
        NewDocument(content=f"Page {n} about geysers.", external_id=f"p{n}.md") for n in (1, 2)
    ]
    with RagClient(live.url, token) as rag:
        rag.sync("bg", first)
        accepted = rag.sync_in_background(
            "bg",
            [
                NewDocument(content="Geysers erupt on a schedule.", external_id="p3.md"),
                DocumentReference(external_id="p1.md", version="none"),
            ],
        )
        job = rag.wait(accepted.job_id, poll_seconds=0.2, timeout_seconds=120)
        assert job.sync is not None, job
        assert job.sync.outcome is not None, job
        assert job.sync.outcome["added"] == ["p3.md"]
        assert job.sync.outcome["missing"] == ["p1.md"]  # stored without that version: kept
        assert job.sync.outcome["deleted"] == ["p2.md"]
        receipt = rag.receipt(str(job.sync.receipt_id))
        left = sorted(str(d.external_id) for d in rag.iter_documents(collection="bg"))
    assert receipt["kind"] == "sync"
    assert left == ["p1.md", "p3.md"]


def test_refusals_are_one_line_with_a_hint(live: LiveService, env: dict[str, str]) -> None:
    anonymous = _light(run_rag("search", "lava", "--url", live.url, env=env))
    assert anonymous.returncode == 2
    assert "RAG_TOKEN" in anonymous.stderr
    assert "Traceback" not in anonymous.stderr
    reader = live.token(live.tenant(), "rag:search")
    refused = _light(
        run_rag(
            "documents", "delete", str(uuid.uuid4()), "--url", live.url, "--token", reader, env=env
        )
    )
    assert refused.returncode == 2
    assert "rag:ingest" in refused.stderr
    down = run_rag("search", "lava", "--url", "http://127.0.0.1:9", "--token", reader, env=env)
    assert down.returncode == 2
    assert "cannot reach" in down.stderr


def test_tenant_create_through_the_admin_api(live: LiveService, env: dict[str, str]) -> None:
    admin = live.token(live.tenant(prefix="admin"), ADMIN_SCOPES)
    new_id = f"c-{uuid.uuid4().hex[:10]}"
    made = _light(
        run_rag(
            "tenant",
            "create",
            new_id,
            "--tier",
            "pro",
            "--url",
            live.url,
            "--token",
            admin,
            env=env,
        )
    )
    assert made.returncode == 0, made.stderr
    assert f"tenant {new_id} ready (tier pro, active) in the service at {live.url}" in made.stderr
    assert "without --url: the local database" in made.stderr
    with RagClient(live.url, admin) as rag:
        assert rag.tenant_stats(new_id).documents == 0


def test_tenant_create_with_rag_url_set_says_where_and_how_to_act_locally(
    live: LiveService, env: dict[str, str]
) -> None:
    """The tutorial exports RAG_URL and RAG_TOKEN (a data token): `rag tenant create` then
    goes to the service, says so, and on the admin scope's refusal says what else to do."""
    tenant = live.tenant()
    exported = {**env, "RAG_URL": live.url, "RAG_TOKEN": live.token(tenant)}
    new_id = f"c-{uuid.uuid4().hex[:10]}"
    refused = _light(run_rag("tenant", "create", new_id, env=exported))
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert f"through the service at {live.url} (RAG_URL;" in refused.stderr
    assert "rag:admin" in refused.stderr
    assert "unset RAG_URL" in refused.stderr
    assert "local database" in refused.stderr


def test_local_tenant_commands_with_rag_url_set_say_they_act_on_the_local_database(
    env: dict[str, str], tmp_path: Path
) -> None:
    exported = {**env, "RAG_URL": "http://127.0.0.1:9", "RAG_DATA_DIR": str(tmp_path / "data")}
    listed = run_rag("tenant", "list", env=exported)
    assert listed.returncode == 0, listed.stderr
    assert f"the embedded database in {tmp_path / 'data' / 'pgdata'}" in listed.stderr
    assert "not the service at RAG_URL=http://127.0.0.1:9" in listed.stderr


def test_ingest_in_the_background_shows_the_jobs_results(
    live: LiveService, env: dict[str, str], tmp_path: Path
) -> None:
    """`rag ingest --url … --background`: the files go as a job, the
    command follows the service's progress and prints the same summary as a direct ingest."""
    token = live.token(live.tenant())
    remote = ("--url", live.url, "--token", token, "--background")
    folder = _folder(tmp_path)
    (folder / "picture.txt").write_bytes(PNG)

    first = _light(run_rag("ingest", str(folder), *remote, env=env))
    assert first.returncode == 1, first.stderr  # the PNG failed in the job, the others went
    assert "submitted 3 files as 1 job:" in first.stderr
    assert "failed: picture.txt: " in first.stdout
    with RagClient(live.url, token) as rag:
        documents = {d.external_id for d in rag.iter_documents()}
    assert documents == {"volcanoes.md", "sub/bread.txt"}  # relative paths, as direct

    (folder / "picture.txt").unlink()
    again = _light(run_rag("ingest", str(folder), *remote, env=env))
    assert again.returncode == 0, again.stderr
    assert "│     2 │      2 │        0 │         2 │      0 │" in again.stdout  # all unchanged

    alone = run_rag("ingest", str(folder), "--background", "--tenant", "x", env=env)
    assert alone.returncode == 2
    assert "--background needs --url" in alone.stderr


def test_ingest_in_the_background_can_call_back(
    live: LiveService, env: dict[str, str], tmp_path: Path
) -> None:
    """`--callback-url`: each job POSTs its summary, signed, when it ends."""
    token = live.token(live.tenant())
    folder = _folder(tmp_path)
    with receiving(WEBHOOK_SECRET, [204]) as receiver:
        remote = ("--url", live.url, "--token", token, "--background")
        run = _light(
            run_rag("ingest", str(folder), *remote, "--callback-url", receiver.url, env=env)
        )
        assert run.returncode == 0, run.stderr
        assert f"each job calls back {receiver.url}" in run.stderr
        job_id = run.stderr.split(" job: ")[1].split()[0]
        with RagClient(live.url, token) as rag:
            deadline = time.monotonic() + 60
            while (callback := rag.job(job_id).callback) and callback.status != "delivered":
                assert time.monotonic() < deadline, callback
                time.sleep(0.2)
    [delivered] = receiver.received
    assert delivered.verified
    assert delivered.headers["webhook-id"] == job_id
    alone = run_rag(
        "ingest", str(folder), "--callback-url", receiver.url, "--url", live.url, env=env
    )
    assert alone.returncode == 2
    assert "--callback-url needs --background" in alone.stderr


def test_a_folder_costs_a_few_requests(
    live: LiveService, env: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`rag ingest FOLDER --url` sends text files in batches, not one request per file (the
    tenant's own rate limit would pause a large folder), each file keeping the `filename`
    metadata and the type an upload gets; a PDF goes alone."""
    tenant = live.tenant(tier="pro")
    token = live.token(tenant)
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(40):
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\n\nThe harbour log, entry {i}.\n")
    (folder / "page.html").write_text("<html><body><h1>Tides</h1><p>High at noon.</p></body>")
    (folder / "tides.pdf").write_bytes(pdf_bytes(("High water at noon, low water at dusk.",)))

    with caplog.at_level(logging.INFO, logger="app.access"):
        run = _light(run_rag("ingest", str(folder), "--url", live.url, "--token", token, env=env))
    assert run.returncode == 0, run.stderr
    sent = [
        f"{getattr(r, 'method', '')} {getattr(r, 'route', '')}"
        for r in caplog.records
        if getattr(r, "tenant", None) == tenant
    ]
    assert sorted(sent) == [
        "POST /api/rag/documents/batch",
        "POST /api/rag/documents/batch",
        "POST /api/rag/documents/upload",
    ], sent
    with RagClient(live.url, token) as rag:
        documents = {d.external_id: d for d in rag.iter_documents()}
    assert len(documents) == 42
    assert documents["note07.md"].metadata == {"filename": "note07.md"}
    assert documents["note07.md"].title == "Note 7"
    assert documents["page.html"].source_type == "html"
    assert documents["tides.pdf"].source_type == "pdf"


def test_a_wait_on_429_is_said(live: LiveService) -> None:
    """The command's client says why it pauses on a 429, never silently."""
    token = live.token(live.tenant(tier=TINY_TIER))  # 2 requests per 2-second window
    said = io.StringIO()
    target = Remote(url=live.url, token=token, tenant=None)
    with connect(target, console=Console(file=said, width=200)) as rag:
        for _ in range(3):  # the third waits out the window
            rag.list_documents(limit=1)
    [line] = said.getvalue().splitlines()
    assert line.startswith("the tenant's rate limit (429: rate limit of 2 requests exceeded")
    assert "waiting" in line
