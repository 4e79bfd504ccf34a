"""The service as a user installs it: its wheel, built from this checkout, installed into a new
virtualenv at the versions constraints.txt names; then `rag --version`, and `rag search --url`
against the live service over a real port."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from rag_client import RagClient

from app import __version__
from tests.client.conftest import LiveService

ROOT = Path(__file__).resolve().parents[2]
# what the wheel is built from (setup.py); the rest of the checkout stays out of the build
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "app",
    "migrations",
    "clients/python/rag_client",
)


def _build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    for name in SOURCES:
        origin, target = ROOT / name, source / name
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("rag_service-*.whl")
    return wheel


def _top_level(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name.split("/")[0] for name in archive.namelist() if ".dist-info/" not in name}


@pytest.mark.slow
def test_the_wheel_installs_a_rag_that_searches_a_live_service(
    live: LiveService, tmp_path: Path
) -> None:
    wheel = _build_wheel(tmp_path)
    assert _top_level(wheel) == {"app", "rag_client"}  # migrations ship inside app
    with zipfile.ZipFile(wheel) as archive:
        assert "app/db/migrations/versions/0001_initial.py" in archive.namelist()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    installed = subprocess.run(
        [*install, "-c", str(ROOT / "constraints.txt"), str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr
    checked = subprocess.run(
        [str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stdout  # every requirement of every package met

    # the new environment alone, away from the checkout: `app` must come from the wheel
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "VIRTUAL_ENV"} and not k.startswith("RAG_")
    }
    env = {**clean, "COLUMNS": "200", "RAG_DATA_DIR": str(tmp_path / "nowhere")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
        )

    probe = "import app, importlib.util as u; print(app.__file__, u.find_spec('migrations'))"
    where = run(str(python), "-c", probe)
    assert where.returncode == 0, where.stderr
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert where.stdout.split() == [str(site / "site-packages" / "app" / "__init__.py"), "None"]

    rag = str(venv / "bin" / "rag")
    version = run(rag, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"rag-service {__version__}"

    tenant = live.tenant()
    token = live.token(tenant)
    with RagClient(live.url, token, timeout=30) as client:
        client.ingest("Glaciers carve valleys out of rock.", title="Glaciers", external_id="g")
        client.ingest("Bread rises in a warm oven.", title="Bread", external_id="b")
    remote = ("--url", live.url, "--token", token)
    found = run(rag, "search", "glaciers carve valleys", "--max-results", "1", *remote)
    assert found.returncode == 0, found.stderr
    assert "Glaciers" in found.stdout
    assert "Bread" not in found.stdout
