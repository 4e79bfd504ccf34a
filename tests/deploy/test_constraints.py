"""constraints.txt, the versions every install takes (scripts/_env.sh, the Dockerfile, the wheel
test), agrees with pyproject.toml: a dependency added or moved without `scripts/lock` fails here
before it fails an install."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from tests.deploy.compose import ROOT


def _pins() -> dict[NormalizedName, Version]:
    pins: dict[NormalizedName, Version] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        [specifier] = requirement.specifier
        assert specifier.operator == "==", line
        pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [line for lines in project["optional-dependencies"].values() for line in lines]
    return [Requirement(line) for line in [*project["dependencies"], *extras]]


def test_every_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    for requirement in _declared():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is missing from constraints.txt: scripts/lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{requirement}: constraints.txt has {pins[name]}: scripts/lock"
        )


def test_torch_is_the_cpu_release_and_the_project_pins_nothing_of_its_own() -> None:
    pins = _pins()
    assert pins[canonicalize_name("torch")] == Version("2.13.0")
    assert not any(name.startswith("nvidia-") for name in pins)  # a CUDA build's companions
    assert not {"rag-service", "rag-service-client"} & set(pins)
