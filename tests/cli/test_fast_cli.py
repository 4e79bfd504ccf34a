"""`rag --help`, `rag --version`, `rag token` import nothing heavy (no database layer, no
model, no torch): they answer at once (figures: docs/REFERENCE.md, "Command line";
bench/cli_bench.py). The in-process data commands import what their work needs, and what a
command may never need is imported when it does: a file format's parser, the model's runtime,
redis-py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app import __version__
from app.citations import CitationStyle
from app.cli.options import Fusion, Mode, Style
from app.retrieval import FusionMethod, SearchMode
from tests.cli.imports import packages_imported_by, run_rag

# pdf, Word, PowerPoint, Excel, HTML and markdown parsers: imported by the first file of theirs.
PARSERS = frozenset({"pypdf", "docx", "pptx", "openpyxl", "PIL", "bs4", "markdown_it"})
# The local model's runtimes (loaded with the model), the OpenAI SDK (built with its embedder).
MODEL = frozenset({"torch", "sentence_transformers", "transformers", "onnxruntime", "openai"})


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


def test_in_process_commands_import_no_parser_model_http_stack_or_redis() -> None:
    """`app.cli.local` backs every in-process data command (`rag documents list` as much as
    `rag ingest`): the reply models it shapes with come from the API's *_models modules, not
    the routers (FastAPI), and Redis is imported only when RAG_REDIS_URL is set."""
    loaded = packages_imported_by("app.cli.local")
    assert "sqlalchemy" in loaded  # the probe sees imports at all
    assert loaded & (PARSERS | MODEL | {"fastapi", "starlette", "redis"}) == set()


def test_the_service_imports_no_parser_or_model_runtime_at_start() -> None:
    """The parsers come with the first file of their format (in a sandbox worker, mostly), the
    model's runtime with the model, in the lifespan."""
    loaded = packages_imported_by("app.main")
    assert "fastapi" in loaded
    assert loaded & (PARSERS | MODEL) == set()
