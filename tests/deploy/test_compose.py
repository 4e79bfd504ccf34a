"""No Docker engine runs here: check the compose file and Dockerfile by reading them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
Service = dict[str, object]


@pytest.fixture(scope="module")
def services() -> dict[str, Service]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(compose) >= {"services", "volumes"}
    return cast(dict[str, Service], compose["services"])


def test_compose_has_database_cache_migration_and_app(services: dict[str, Service]) -> None:
    assert set(services) == {"db", "redis", "migrate", "app"}
    assert re.fullmatch(r"pgvector/pgvector:pg1[78]", str(services["db"]["image"]))
    assert str(services["redis"]["image"]).startswith("redis:7")


def test_long_running_services_have_healthchecks(services: dict[str, Service]) -> None:
    for name in ("db", "redis", "app"):
        check = cast(dict[str, object], services[name]["healthcheck"])
        assert check["test"], name


def test_startup_order_waits_for_health_and_migration(services: dict[str, Service]) -> None:
    migrate = cast(dict[str, dict[str, str]], services["migrate"]["depends_on"])
    app = cast(dict[str, dict[str, str]], services["app"]["depends_on"])
    assert migrate["db"]["condition"] == "service_healthy"
    assert app["migrate"]["condition"] == "service_completed_successfully"
    assert app["redis"]["condition"] == "service_healthy"
    assert services["migrate"]["command"] == ["rag", "migrate"]


def test_app_connects_as_runtime_role_and_migrates_as_owner(services: dict[str, Service]) -> None:
    env = cast(dict[str, str], services["migrate"]["environment"])
    assert env["RAG_DATABASE_URL"].startswith("postgresql://rag_app:")
    assert env["RAG_MIGRATION_DATABASE_URL"].startswith("postgresql://postgres:")
    app_env = cast(dict[str, str], services["app"]["environment"])
    assert app_env["RAG_DATABASE_URL"] == env["RAG_DATABASE_URL"]
    assert app_env["RAG_REDIS_URL"].startswith("redis://redis:")


def test_data_lives_in_named_volumes(services: dict[str, Service]) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(compose["volumes"]) == {"pgdata", "redisdata"}
    assert "pgdata:/var/lib/postgresql/data" in cast(list[str], services["db"]["volumes"])


def test_dockerfile_is_multistage_non_root_with_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", text, flags=re.M)) >= 2
    assert re.search(r"^USER (?!root)\w+", text, flags=re.M)
    assert re.search(r"^HEALTHCHECK ", text, flags=re.M)
    assert "torch==2.13.0" in text
