"""`rag --help`, `rag --version`, `rag token` import nothing heavy (no database layer, no
model, no torch): they answer at once (figures: docs/REFERENCE.md, "Command line";
bench/cli_bench.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app import __version__
from app.citations import CitationStyle
from app.cli.options import Fusion, Mode, Style
from app.retrieval import FusionMethod, SearchMode
from tests.cli.imports import run_rag


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {**clean, "RAG_DATA_DIR": str(tmp_path)}


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("--version",),
        ("token", "--tenant", "acme"),
        ("tenant", "--help"),
        ("search", "--help"),
        ("documents", "--help"),
        ("ingest", "--help"),
    ],
    ids=" ".join,
)
def test_light_commands_import_nothing_heavy(args: tuple[str, ...], env: dict[str, str]) -> None:
    run = run_rag(*args, env=env)
    assert run.returncode == 0, run.stderr
    assert "typer" in run.modules  # the check sees imports at all
    assert run.heavy() == []
    if args[0] in {"--help", "--version"}:
        assert not {"httpx", "rag_client", "app.settings"} & run.modules


def test_version(env: dict[str, str]) -> None:
    run = run_rag("--version", env=env)
    assert run.stdout == f"rag-service {__version__}\n"


def test_the_cli_parses_with_the_domain_enums() -> None:
    assert Mode is SearchMode
    assert Style is CitationStyle
    assert Fusion is FusionMethod


def test_local_commands_without_a_tenant_say_so(env: dict[str, str]) -> None:
    run = run_rag("search", "anything", env=env)
    assert run.returncode == 2
    assert "--tenant is required without --url" in run.stderr
    assert run.heavy() == []
