"""The client as a user gets it: `pip install ./clients/python` into a new virtualenv holding
nothing else, then a script run there against the live service over a real port."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.client.conftest import LiveService

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
SCRIPT = """
import importlib.util, json, sys
from rag_client import RagClient, NotFound, Invalid

url, token = sys.argv[1], sys.argv[2]
with RagClient(url, token, retries=2, timeout=30) as rag:
    made = rag.ingest("Glaciers carve valleys out of rock.", title="Glaciers", external_id="g")
    found = rag.search("glaciers carve valleys", max_results=1)
    try:
        rag.get_document("00000000-0000-0000-0000-000000000000")
        missing = False
    except NotFound:
        missing = True
    try:
        rag.search("x", max_results=0)
        fields = []
    except Invalid as error:
        fields = [e.field for e in error.errors]
server_side = ("app", "fastapi", "sqlalchemy", "torch", "numpy")
absent = [m for m in server_side if importlib.util.find_spec(m)]
print(json.dumps({
    "created": made.created,
    "top_title": found.chunks[0].title,
    "not_found": missing,
    "invalid_fields": fields,
    "server_packages_present": absent,
}))
"""


@pytest.mark.slow
def test_installs_alone_and_talks_to_a_live_service(live: LiveService, tmp_path: Path) -> None:
    source = tmp_path / "client-src"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # the fresh environment alone: a PYTHONPATH of the caller's would list its packages too
    clean = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=clean,
    )
    names = {item["name"].lower() for item in json.loads(listed.stdout)}
    assert {"rag-service-client", "httpx", "pydantic"} <= names
    assert not names & {"torch", "fastapi", "sqlalchemy", "rag-service"}

    token = live.token(live.tenant())
    run = subprocess.run(
        [str(python), "-c", SCRIPT, live.url, token],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # not the repository: `app` must not be importable from there
        env=clean,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {
        "created": True,
        "top_title": "Glaciers",
        "not_found": True,
        "invalid_fields": ["max_results"],
        "server_packages_present": [],
    }
