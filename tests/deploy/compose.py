"""The compose files as data, for tests that check them without a Docker engine."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import cast

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = ("docker-compose.yml", "docker-compose.citus.yml")
SCHEMA = Path(__file__).with_name("compose-spec.json")
Json = dict[str, object]


@cache
def load(name: str) -> Json:
    return cast(Json, yaml.safe_load((ROOT / name).read_text()))


def volumes_declared(name: str) -> set[str]:
    return set(cast(Json, load(name).get("volumes") or {}))


def schema_errors(document: Mapping[str, object]) -> list[str]:
    """Where `document` breaks the Compose Specification's schema (empty when it does not)."""
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    return [
        f"{'/'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in validator.iter_errors(document)
    ]


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    spec: Json

    @property
    def image(self) -> str:
        return str(self.spec.get("image", ""))

    @property
    def command(self) -> list[str]:
        command = self.spec.get("command", [])
        if isinstance(command, str):
            return command.split()
        return [str(c) for c in cast(list[object], command)]

    @property
    def environment(self) -> dict[str, str]:
        env = self.spec.get("environment", {})
        if isinstance(env, list):
            return dict(str(item).partition("=")[::2] for item in env)
        return {str(k): str(v) for k, v in cast(Json, env).items()}

    @property
    def depends_on(self) -> dict[str, str]:
        """Dependency -> condition."""
        deps = self.spec.get("depends_on", {})
        if isinstance(deps, list):
            return {str(d): "service_started" for d in deps}
        return {str(k): str(cast(Json, v)["condition"]) for k, v in cast(Json, deps).items()}

    @property
    def volumes(self) -> list[tuple[str, str, bool]]:
        """(source, target, read_only) of each short-syntax mount."""
        out = []
        for entry in cast(list[str], self.spec.get("volumes", [])):
            source, target, *mode = entry.split(":")
            out.append((source, target, mode == ["ro"]))
        return out

    @property
    def long_running(self) -> bool:
        return self.spec.get("restart", "no") != "no"

    @property
    def serves_the_app(self) -> bool:
        return self.command[:2] == ["rag", "serve"]


def services(name: str) -> list[Service]:
    compose = load(name)
    return [Service(k, cast(Json, v)) for k, v in cast(Json, compose["services"]).items()]


def service(name: str, service_name: str) -> Service:
    [found] = [s for s in services(name) if s.name == service_name]
    return found


def app_replicas(name: str) -> list[Service]:
    return [s for s in services(name) if s.serves_the_app]


def nginx_upstreams(path: Path) -> set[str]:
    """The `server host:port` lines of the nginx config's upstream blocks."""
    text = path.read_text()
    blocks = re.findall(r"upstream\s+\w+\s*\{([^}]*)\}", text)
    return {m for block in blocks for m in re.findall(r"^\s*server\s+([\w.-]+:\d+)", block, re.M)}


def url_host(url: str) -> str:
    """The host of a postgresql:// or redis:// URL (compose variables left as they are)."""
    match = re.match(r"^\w+://(?:[^@/]*@)?([^:/?]+)", url)
    assert match, url
    return match.group(1)
