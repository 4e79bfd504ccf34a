"""`rag eval` scores alike in process and over `--url`: the same searches (the search operation
in process, POST /api/rag/search through the client remotely) with the same defaults, on the
same tiny BEIR folder and the same embedder."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from app.cli.evaluate_run import Asked, measure
from app.cli.local import InProcess
from app.evaluation import default_settings, read_beir
from app.resources import Resources
from tests.cli.imports import run_rag
from tests.client.conftest import LiveService
from tests.conftest import TenantClient
from tests.doors.conftest import http, mcp_app, operator, tenant

__all__ = ["http", "mcp_app", "operator", "tenant"]

CORPUS = {
    "d1": "Zeolite catalysts crack heavy oil into petrol.",
    "d2": "Sourdough bread rises slowly with wild yeast.",
    "d3": "Glaciers carve valleys as they move downhill.",
    "d4": "Petrol prices rose again this winter; oil is dear.",
    "d5": "Wild yeast and flour make a slow sourdough starter.",
    "d6": "Valleys filled with ice: the glaciers of the last winter.",
}
QUERIES = {
    "q1": "oil catalysts",
    "q2": "sourdough yeast",
    "q3": "glaciers winter valleys",
    "q4": "petrol",
}
QRELS = [("q1", "d1", 1), ("q2", "d2", 2), ("q2", "d5", 1), ("q3", "d3", 1), ("q4", "d4", 1)]


def beir_folder(root: Path) -> Path:
    folder = root / "tiny"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in CORPUS.items())
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items())
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in QRELS)
    )
    return folder


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {**clean, "RAG_DATA_DIR": str(tmp_path / "nowhere"), "COLUMNS": "200"}


async def test_eval_scores_the_same_in_process_and_over_http(
    live: LiveService,
    env: dict[str, str],
    tmp_path: Path,
    operator: Resources,
    tenant: TenantClient,
) -> None:
    folder = beir_folder(tmp_path)
    out = tmp_path / "remote.json"
    token = live.token(live.tenant())
    remote = run_rag(
        "eval", str(folder), "--url", live.url, "--token", token, "--json", str(out), env=env
    )
    assert remote.returncode == 0, remote.stderr
    assert remote.heavy() == [], remote.heavy()  # a client: no database layer, no model
    report = json.loads(out.read_text())
    assert (report["threshold"], report["top_k"], report["rerank"]) == (0.1, 20, None)

    data = read_beir(folder)
    asked = Asked(top_k=20, threshold=0.1, rerank=None, collection="eval-tiny")
    local = await measure(InProcess(operator, tenant.tenant_id), data, default_settings(), asked)
    found = {name: dataclasses.asdict(s) for name, s in local.items()}
    assert found == report["scores"]
    assert found["keyword"]["queries"] == 4
    # not every setting perfect: the comparison has something to tell apart
    assert any(s["ndcg_at_10"] < 1.0 for s in found.values()), found
