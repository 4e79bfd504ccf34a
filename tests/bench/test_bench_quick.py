"""The benchmark suite beside the alternatives: its quick mode runs end to end, as
CI runs it, and fails when any table or chart is missing or empty. The full mode is the same
code at larger sizes (docs/BENCHMARKS.md, "Beside the alternatives")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENGINES = {
    "service",
    "service over HTTP",
    "Chroma, tenant filter",
    "Chroma, collection per tenant",
    "LanceDB, table per tenant",
    "Milvus Lite, partition key",
    "numpy brute force",
    "pgvector exact scan",
    "naive: load + numpy",
}
CLASSES = ["50%", "10%", "1%", "0.1%"]
TABLES = [
    "Setup",
    "Search latency, one client",
    "Search latency, concurrent clients",
    "Searches/s beside recall@10",
    "Recall@10 against exact search",
    "Recall@10 against ef_search",
    "Ingestion, chunks/s by stage",
    "Index build",
]


def sections(report: str) -> dict[str, str]:
    parts = report.split("\n## ")[1:]
    return {part.split("\n", 1)[0].strip(): part.split("\n", 1)[1] for part in parts}


def table_rows(section: str) -> list[list[str]]:
    """The data rows of every markdown table in a section (header and rule left out)."""
    rows: list[list[str]] = []
    lines = [line for line in section.splitlines() if line.startswith("|")]
    for index, line in enumerate(lines):
        cells = [c.strip() for c in line.strip("|").split("|")]
        is_rule = all(set(c) <= set("-:") for c in cells)
        next_is_rule = index + 1 < len(lines) and set(lines[index + 1]) <= set("|-: ")
        if not is_rule and not next_is_rule:
            rows.append(cells)
    return rows


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench-quick")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("RAG_BENCH_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, f"python -m bench --quick failed:\n{done.stderr[-6000:]}"
    return out


def test_every_table_is_written_and_filled(quick_run: Path) -> None:
    found = sections((quick_run / "report.md").read_text())
    for title in TABLES:
        assert title in found, f"table missing: {title}"
        rows = table_rows(found[title])
        assert rows, f"table empty: {title}"
        for row in rows:
            assert all(cell not in {"", "—", "nan", "inf"} for cell in row[:1]), row
            assert "—" not in row, f"{title}: a cell has no figure: {row}"


def test_every_engine_is_measured_at_every_tenant_size_and_client_count(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text())
    cells = {(r["engine"], r["tenant"], r["clients"]) for r in results["latency"]}
    expected = {(e, c, n) for e in ENGINES for c in CLASSES for n in (1, 4, 16)}
    assert expected <= cells, f"not measured: {sorted(expected - cells)}"
    for row in results["latency"]:
        assert row["n"] >= 10, row
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"], row
        assert 0.0 <= row["recall@10"] <= 1.0, row
    exact = [r for r in results["latency"] if r["engine"] == "numpy brute force"]
    assert all(r["recall@10"] == 1.0 for r in exact), "the exact reference must agree with itself"
    assert {r["engine"] for r in results["sweep"]} == {"service"}
    assert len(results["store"]) == 3
    assert {r["index"] for r in results["index_builds"]} == {
        "pgvector HNSW, vector",
        "pgvector HNSW, halfvec",
        *(e for e in ENGINES if e.startswith(("Chroma", "LanceDB", "Milvus"))),
    }


def test_charts_are_pngs(quick_run: Path) -> None:
    for name in ("latency_vs_size.png", "recall_vs_ef.png"):
        data = (quick_run / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n"), name
        assert len(data) > 5_000, name
