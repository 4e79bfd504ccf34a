"""`rag token` and the server agree on the secret, or both say which secret they use.

A token made in a shell without the server's RAG_DATA_DIR is signed with another secret: the
token command names the secret file and its key id, the server logs its own, and the 401 says
the signature is not the server's and which key id signed the token (never the server's).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jose import jwt

from app.auth import TokenVerifier
from app.auth.keys import key_id
from app.errors import Unauthenticated
from app.settings import Settings, with_dev_jwt_secret
from tests.cli.imports import run_rag


def _env(data_dir: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {**clean, "RAG_DATA_DIR": str(data_dir)}


def _secret_id(data_dir: Path) -> str:
    return key_id((data_dir / "jwt-secret").read_text().strip().encode())


def test_token_names_its_secret_and_says_when_it_made_a_new_one(tmp_path: Path) -> None:
    first = run_rag("token", "--tenant", "acme", env=_env(tmp_path))
    assert first.returncode == 0, first.stderr
    secret_file = tmp_path / "jwt-secret"
    assert f"created a new token secret in {secret_file}" in first.stderr
    assert f"signed with the secret in {secret_file} (key id {_secret_id(tmp_path)})" in (
        first.stderr
    )
    assert jwt.get_unverified_header(first.stdout.strip())["kid"] == _secret_id(tmp_path)

    again = run_rag("token", "--tenant", "acme", env=_env(tmp_path))
    assert again.returncode == 0, again.stderr
    assert "created a new token secret" not in again.stderr
    assert f"(key id {_secret_id(tmp_path)})" in again.stderr


def test_a_token_from_another_data_dir_is_refused_with_the_reason(tmp_path: Path) -> None:
    shell, server = tmp_path / "shell", tmp_path / "server"
    made = run_rag("token", "--tenant", "acme", env=_env(shell))
    assert made.returncode == 0, made.stderr
    verifier = TokenVerifier.from_settings(with_dev_jwt_secret(Settings(data_dir=server)))

    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(made.stdout.strip())

    detail = caught.value.detail
    assert "not signed with this server's secret" in detail
    assert f"signed with key id {_secret_id(shell)}" in detail
    assert _secret_id(server) not in detail  # the server's key id stays in its own log
    assert _secret_id(server) not in caught.value.headers["WWW-Authenticate"]


def test_the_same_data_dir_agrees(tmp_path: Path) -> None:
    made = run_rag("token", "--tenant", "acme", env=_env(tmp_path))
    verifier = TokenVerifier.from_settings(with_dev_jwt_secret(Settings(data_dir=tmp_path)))
    assert verifier.verify(made.stdout.strip()).tenant_id == "acme"


@pytest.mark.parametrize("kid", ["x" * 8, "ABCDEF12", "abc\r\nX-Injected: 1", "0" * 9])
def test_a_foreign_key_id_is_never_echoed(tmp_path: Path, kid: str) -> None:
    settings = with_dev_jwt_secret(Settings(data_dir=tmp_path))
    token = jwt.encode(
        {"tenant_id": "acme", "sub": "x", "exp": 2**31},
        "another-secret-of-sufficient-length-0123456789",
        algorithm="HS256",
        headers={"kid": kid},
    )
    with pytest.raises(Unauthenticated) as caught:
        TokenVerifier.from_settings(settings).verify(token)
    assert kid not in caught.value.detail
    assert "not signed with this server's secret" in caught.value.detail
