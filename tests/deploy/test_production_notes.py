"""The production notes hold: the secrets are written once into a `.env` that is kept (the
same commands in the compose header, README and docs, run here), and TLS is terminated in front
of the proxy (a commented TLS server block in the nginx config, documented)."""

from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests.deploy.compose import ROOT

NGINX = ROOT / "deploy" / "nginx" / "nginx.conf"
SECRETS = ("RAG_JWT_SECRET", "POSTGRES_PASSWORD", "RAG_APP_DB_PASSWORD", "RAG_REPLICATION_PASSWORD")


def _header_snippet() -> str:
    """The secret-writing commands of the compose file's header, uncommented."""
    header = (ROOT / "docker-compose.yml").read_text().split("\nname:", 1)[0]
    lines = [line.removeprefix("#   ") for line in header.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("[ -f .env ]"))
    end = next(i for i in range(start, len(lines)) if lines[i].endswith("> .env )"))
    return "\n".join(lines[start : end + 1]) + "\n"


@pytest.mark.parametrize("doc", ["README.md", "docs/operations.md", "docs/REFERENCE.md"])
def test_the_docs_write_the_secrets_as_the_compose_header_does(doc: str) -> None:
    text = (ROOT / doc).read_text()
    assert _header_snippet() in text
    assert "openssl rand" not in text.replace(_header_snippet(), "")  # no second recipe
    assert re.search(r"[Kk]eep(?: that file| `\.env`)", text)


def test_the_secrets_are_written_once_private_and_kept(tmp_path: Path) -> None:
    def run() -> str:
        done = subprocess.run(
            ["bash", "-c", _header_snippet()], cwd=tmp_path, capture_output=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        return (tmp_path / ".env").read_text()

    first = run()
    assert [line.split("=", 1)[0] for line in first.splitlines()] == list(SECRETS)
    assert all(len(line.split("=", 1)[1]) >= 32 for line in first.splitlines())
    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    assert run() == first  # a second day's run keeps the first secrets


def test_the_env_file_never_reaches_git_or_the_image() -> None:
    for ignore in (".gitignore", ".dockerignore"):
        assert ".env" in (ROOT / ignore).read_text().splitlines(), ignore


def _commented_tls_block() -> str:
    conf = NGINX.read_text()
    start = conf.index("  # server {\n")
    block = conf[start : conf.index("  # }\n", start) + len("  # }\n")]
    return "\n".join(line.strip().removeprefix("#").strip() for line in block.splitlines())


def test_the_proxy_config_has_a_commented_tls_server_block() -> None:
    block = _commented_tls_block()
    assert "listen 443 ssl;" in block
    assert re.search(r"ssl_certificate\s+/etc/nginx/certs/\S+;", block)
    assert re.search(r"ssl_certificate_key\s+/etc/nginx/certs/\S+;", block)
    assert "ssl_protocols TLSv1.2 TLSv1.3;" in block
    assert "proxy_pass http://rag_app;" in block
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in block
    # uncommented, it must not publish what the plain server keeps inside
    assert re.search(r"location \^~ /metrics \{\s*return 404;\s*\}", block)
    assert block.count("{") == block.count("}")


def test_the_operations_guide_says_how_to_terminate_tls() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    tls = guide[guide.index("### TLS") :]
    assert "deploy/nginx/nginx.conf" in tls
    assert "443" in tls
    assert "RAG_MCP_ALLOWED_HOSTS" in tls
    assert 'docs/operations.md, "TLS"' in (ROOT / "docker-compose.yml").read_text()
