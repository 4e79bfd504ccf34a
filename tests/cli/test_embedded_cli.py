"""The `rag` command on its embedded defaults, as a user runs it (separate processes)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.auth import TokenVerifier
from app.db.embedded import TUNING_FILE, start_embedded
from app.db.tuning import memory_bytes, shared_buffers_mb
from app.settings import Settings, with_dev_jwt_secret
from tests.ingest.office import docx_bytes, pptx_bytes, xlsx_bytes
from tests.processes import free_port, scratch_directory, wait_healthy

RAG = [sys.executable, "-m", "app.cli.main"]


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    """A data directory outside pytest's basetemp, which is private (0700) to this user: the
    embedded server runs as its own system user (under xdist, a worker's folder is too)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    with scratch_directory("rag-cli-") as data:
        data.chmod(0o755)
        yield {**clean, "RAG_DATA_DIR": str(data / "rag-data")}


@pytest.fixture
def running(env: dict[str, str]) -> Iterator[None]:
    """The embedded server kept running through a test, as a `rag serve` beside the commands
    keeps it: each command attaches to it and detaches (app/db/embedded.py) instead of
    starting and stopping it. For the tests of what the data commands do; the start, the
    restarts and the stop are checked by the tests that do without it (tenant create, serve,
    the shared buffers)."""
    server = start_embedded(Path(env["RAG_DATA_DIR"]) / "pgdata")  # the commands' tuning
    try:
        yield
    finally:
        server.stop()


def rag(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAG, *args], env=env, capture_output=True, text=True, timeout=120)


def test_tenant_create_is_idempotent_and_survives_restarts(env: dict[str, str]) -> None:
    first = rag("tenant", "create", "acme", env=env)
    assert first.returncode == 0, first.stderr
    assert "tenant acme created" in first.stderr
    again = rag("tenant", "create", "acme", "--tier", "basic", env=env)
    assert again.returncode == 0, again.stderr
    assert "tenant acme already exists" in again.stderr


def test_tenant_create_rejects_bad_ids_and_tiers(env: dict[str, str]) -> None:
    bad_id = rag("tenant", "create", "not ok!", env=env)
    assert bad_id.returncode == 2
    assert "invalid tenant id" in bad_id.stderr
    bad_tier = rag("tenant", "create", "acme", "--tier", "platinum", env=env)
    assert bad_tier.returncode == 2
    assert "unknown tier" in bad_tier.stderr


def test_bad_setting_names_the_variable(env: dict[str, str]) -> None:
    result = rag("tenant", "create", "acme", env={**env, "RAG_CHUNK_TOKENS": "lots"})
    assert result.returncode == 2
    assert "RAG_CHUNK_TOKENS" in result.stderr


def test_serve_answers_and_stops_cleanly_on_ctrl_c(env: dict[str, str]) -> None:
    port = free_port()
    server = subprocess.Popen(
        [*RAG, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}/healthz"), "server did not come up"
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    # quiet start: a line for the database, the model, the URL and the token secret, no more
    assert "database: embedded PostgreSQL 18" in stderr
    assert "local embedder local:all-MiniLM-L6-v2 (onnx) loaded" in stderr
    assert f"ready on http://127.0.0.1:{port} (explorer: http://127.0.0.1:{port}/docs" in stderr
    assert f"console: http://127.0.0.1:{port}/console;" in stderr
    assert "tokens: HMAC secret in " in stderr
    assert "Starting worker" not in stderr  # the job queue's detail is for --verbose
    for noise in ("pg_ctl", "initdb", "XDG_RUNTIME_DIR", "alembic", "Traceback"):
        assert noise not in stderr, stderr
    pid_file = Path(env["RAG_DATA_DIR"]) / "pgdata" / "postmaster.pid"
    assert not pid_file.exists(), "embedded PostgreSQL still running after Ctrl-C"


def _spawned_children(pid: int) -> int:
    """Worker processes uvicorn's supervisor spawned under `pid`."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sum(
        b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
        for child in children
        if Path(f"/proc/{child}").exists()
    )


def test_serve_with_two_workers_shares_one_database_and_the_limit(env: dict[str, str]) -> None:
    """`rag serve --workers 2`: two processes on one socket, one embedded database started
    once, one token secret; without Redis each admits half a tenant's limit, so together they
    never admit more than the limit."""
    assert rag("tenant", "create", "two-workers", env=env).returncode == 0
    token = rag("token", "--tenant", "two-workers", env=env).stdout.strip()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*RAG, "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_healthy(f"{url}/readyz"), "the workers did not come up"
        assert _spawned_children(server.pid) == 2
        headers = {"Authorization": f"Bearer {token}"}
        body = {"title": "Workers", "content": "Two worker processes answer on one port."}
        created = httpx.post(f"{url}/api/rag/documents", json=body, headers=headers, timeout=60)
        assert created.status_code == 201, created.text
        statuses = [  # a new connection each: the kernel spreads them over the workers
            httpx.get(f"{url}/api/rag/documents", headers=headers, timeout=30).status_code
            for _ in range(130)
        ]
        assert set(statuses) <= {200, 429}
        assert 50 <= statuses.count(200) + 1 <= 100  # basic tier: 100 a minute, 50 each
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=90)
    assert server.returncode == 0, stderr
    assert "with 2 worker processes" in stderr
    pid_file = Path(env["RAG_DATA_DIR"]) / "pgdata" / "postmaster.pid"
    assert not pid_file.exists(), "embedded PostgreSQL still running after Ctrl-C"


def test_the_embedded_shared_buffers_follow_the_setting(env: dict[str, str]) -> None:
    tuning = Path(env["RAG_DATA_DIR"]) / "pgdata" / TUNING_FILE
    chosen = rag("tenant", "create", "acme", env={**env, "RAG_EMBEDDED_SHARED_BUFFERS_MB": "160"})
    assert chosen.returncode == 0, chosen.stderr
    assert "shared_buffers = '160MB'" in tuning.read_text()
    sized = rag("tenant", "create", "acme", env=env)
    assert sized.returncode == 0, sized.stderr
    assert f"shared_buffers = '{shared_buffers_mb(memory_bytes())}MB'" in tuning.read_text()
    too_small = rag("tenant", "create", "acme", env={**env, "RAG_EMBEDDED_SHARED_BUFFERS_MB": "8"})
    assert too_small.returncode == 2
    assert "RAG_EMBEDDED_SHARED_BUFFERS_MB" in too_small.stderr


def test_token_prints_only_a_token_the_service_accepts(env: dict[str, str]) -> None:
    result = rag("token", "--tenant", "acme", "--scopes", "rag:search", "--ttl", "60", env=env)
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    assert result.stdout == token + "\n"
    settings = with_dev_jwt_secret(Settings(_env_file=None, data_dir=Path(env["RAG_DATA_DIR"])))
    principal = TokenVerifier.from_settings(settings).verify(token)
    assert (principal.tenant_id, principal.scopes) == ("acme", frozenset({"rag:search"}))


@pytest.mark.usefixtures("running")
def test_ingest_and_search_a_folder(env: dict[str, str], tmp_path: Path) -> None:
    assert rag("tenant", "create", "docs-co", env=env).returncode == 0
    folder = tmp_path / "kb"
    (folder / "sub").mkdir(parents=True)
    (folder / "volcanoes.md").write_text("# Volcanoes\n\nMagma erupts as lava from a volcano.\n")
    (folder / "sub" / "bread.txt").write_text(
        "Knead the dough and bake the bread at 220 degrees.\n"
    )
    (folder / "picture.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    first = rag("ingest", str(folder), "--tenant", "docs-co", env=env)
    assert first.returncode == 1, first.stderr  # the PNG failed
    assert "picture.txt: " in first.stdout
    assert "PNG" in first.stdout
    again = rag("ingest", str(folder / "volcanoes.md"), "--tenant", "docs-co", env=env)
    assert again.returncode == 0, again.stderr
    found = rag("search", "lava eruption", "--tenant", "docs-co", "--max-results", "1", env=env)
    assert found.returncode == 0, found.stderr
    assert "Volcanoes" in found.stdout
    ranking = ("--mode", "hybrid", "--fusion", "rrf", "--ef-search", "50", "--diversity", "0.2")
    fused = rag("search", "lava eruption", "--tenant", "docs-co", *ranking, env=env)
    assert fused.returncode == 0, fused.stderr
    assert "Volcanoes" in fused.stdout
    assert re.search(r"\b0\.0(328|164)\b", fused.stdout)  # reciprocal rank fusion: 2/61 or 1/61
    indexed = rag("index", "--min-chunks", "2", env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert "docs-co" in indexed.stdout
    assert "created" in indexed.stdout
    assert "64MB" in indexed.stdout  # a small graph's build memory: PostgreSQL's default
    kept = rag("index", "--min-chunks", "2", "--dry-run", env=env)
    assert "kept" in kept.stdout
    assert "created" not in kept.stdout
    assert "nothing to do" in kept.stdout
    dropped = rag("index", "--min-chunks", "100", env=env)
    assert "dropped" in dropped.stdout
    refused = rag("index", "--min-chunks", "2", "--maintenance-work-mem", "lots", env=env)
    assert refused.returncode == 2
    assert "is not a size such as 512MB" in refused.stderr
    untouched = rag("index", "--min-chunks", "2", "--dry-run", env=env)
    assert "would be created" in untouched.stdout  # the refusal built nothing
    fixed = rag("index", "--min-chunks", "2", "--maintenance-work-mem", "100MB", env=env)
    assert fixed.returncode == 0, fixed.stderr
    assert "created" in fixed.stdout
    assert "100MB" in fixed.stdout
    assert "dropped" in rag("index", "--min-chunks", "100", env=env).stdout

    built = rag("context", "lava eruption", "--tenant", "docs-co", "--max-results", "1", env=env)
    assert built.returncode == 0, built.stderr
    assert "lava" in built.stdout
    wide = {**env, "COLUMNS": "200"}
    listed = rag("documents", "list", "--tenant", "docs-co", env=wide)
    assert listed.returncode == 0, listed.stderr
    assert "sub/bread.txt" in listed.stdout  # external ids relative to the folder given
    bread = next(line for line in listed.stdout.splitlines() if "sub/bread.txt" in line)
    bread_id = bread.split("│")[1].strip()
    shown = rag("documents", "show", bread_id, "--tenant", "docs-co", env=wide)
    assert "sub/bread.txt" in shown.stdout

    # similar and dedupe in process: a near copy of the bread recipe is found, then merged
    copy = tmp_path / "bread-again.txt"
    copy.write_text("Knead the dough and bake the bread at 220 degrees!\n")
    assert rag("ingest", str(copy), "--tenant", "docs-co", env=env).returncode == 0
    like = rag("similar", bread_id, "--tenant", "docs-co", "--min-similarity", "0.9", env=wide)
    assert like.returncode == 0, like.stderr
    assert "1 found" in like.stdout
    preview = rag("dedupe", "--tenant", "docs-co", "--threshold", "0.9", env=wide)
    assert preview.returncode == 0, preview.stderr
    assert "1 group: would delete 1 duplicate" in preview.stdout
    merged = rag(
        "dedupe",
        "--tenant",
        "docs-co",
        "--threshold",
        "0.9",
        "--apply",
        "--merge-strategy",
        "keep_oldest",
        env=wide,
    )
    assert "1 group: deleted 1 duplicate" in merged.stdout, merged.stdout + merged.stderr
    again = rag("dedupe", "--tenant", "docs-co", "--threshold", "0.9", env=wide)
    assert "0 groups: would delete 0 duplicates" in again.stdout
    wrong = rag("dedupe", "--tenant", "docs-co", "--merge-strategy", "coin", env=env)
    assert wrong.returncode == 2
    assert "keep_newest" in wrong.stderr
    assert rag("documents", "delete", bread_id, "--tenant", "docs-co", env=env).returncode == 0
    gone = rag("documents", "show", bread_id, "--tenant", "docs-co", env=env)
    assert gone.returncode == 2
    assert "does not exist" in gone.stderr


@pytest.mark.usefixtures("running")
def test_ingest_a_folder_of_office_files(env: dict[str, str], tmp_path: Path) -> None:
    assert rag("tenant", "create", "office-co", env=env).returncode == 0
    folder = tmp_path / "office"
    folder.mkdir()
    (folder / "handbook.docx").write_bytes(docx_bytes())
    (folder / "review.pptx").write_bytes(pptx_bytes())
    (folder / "stock.xlsx").write_bytes(xlsx_bytes(rows=3))
    (folder / "~$handbook.docx").write_bytes(b"\x05tester" + b"\x00" * 155)  # a lock file
    done = rag("ingest", str(folder), "--tenant", "office-co", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    wide = {**env, "COLUMNS": "200"}
    listed = rag("documents", "list", "--tenant", "office-co", env=wide)
    for name in ("handbook.docx", "review.pptx", "stock.xlsx"):
        assert name in listed.stdout
    assert "~$handbook" not in listed.stdout


@pytest.mark.usefixtures("running")
def test_data_commands_refuse_an_unknown_tenant(env: dict[str, str]) -> None:
    result = rag("search", "anything", "--tenant", "nobody", env=env)
    assert result.returncode == 2
    assert "does not exist" in result.stderr


@pytest.mark.usefixtures("running")
def test_eval_measures_a_beir_folder_and_bm25_statistics_verify(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert rag("tenant", "create", "eval-co", env=env).returncode == 0
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    corpus = {
        "d1": "Zeolite catalysts crack heavy oil into petrol.",
        "d2": "Sourdough bread rises slowly with wild yeast.",
        "d3": "Glaciers carve valleys as they move downhill.",
        "d4": "Petrol prices rose again this winter.",
    }
    (folder / "corpus.jsonl").write_text(
        "".join(f'{{"_id": "{k}", "title": "", "text": "{v}"}}\n' for k, v in corpus.items())
    )
    (folder / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "zeolite catalysts"}\n{"_id": "q2", "text": "sourdough yeast"}\n'
        '{"_id": "q3", "text": "no judgments"}\n'
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n")
    out = tmp_path / "eval.json"
    result = rag("eval", str(folder), "--tenant", "eval-co", "--json", str(out), env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["queries"] == 2  # q3 has no judgment
    assert report["collection"] == "eval-tiny"
    scores = report["scores"]
    assert set(scores) >= {"keyword", "vector", "hybrid, rrf", "hybrid, weighted 0.5"}
    assert scores["keyword"] == {
        "ndcg_at_10": 1.0,
        "recall_at_10": 1.0,
        "mrr_at_10": 1.0,
        "queries": 2,
    }
    assert "nDCG@10" in result.stdout

    verified = rag("bm25", "verify", env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "eval-co" in verified.stdout
    rebuilt = rag("bm25", "rebuild", "--tenant", "eval-co", env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "differs" not in rebuilt.stdout
    both = rag("eval", str(folder), env=env)
    assert both.returncode == 2  # neither --tenant nor --url
