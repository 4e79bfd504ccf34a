"""The service's image, checked by reading its Dockerfile (no Docker engine here)."""

from __future__ import annotations

import re

from tests.deploy.compose import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _from_lines(text: str) -> list[str]:
    return re.findall(r"^FROM (\S+)", text, flags=re.M)


def test_two_stages_on_one_pinned_base_image() -> None:
    [default] = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, flags=re.M)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", default), default
    assert _from_lines(DOCKERFILE) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_runtime_is_non_root_offline_with_a_healthcheck() -> None:
    runtime = DOCKERFILE.split(" AS runtime", 1)[1]
    assert re.search(r"^USER (?!root)\w+", runtime, flags=re.M)
    assert re.search(r"^HEALTHCHECK .*--start-period=\d+s", runtime, flags=re.M)
    assert "HF_HUB_OFFLINE=1" in runtime
    assert re.search(r'^CMD \["rag", "serve", "--host", "0.0.0.0"', runtime, flags=re.M)


def test_torch_is_the_pinned_cpu_build() -> None:
    assert '"torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu' in DOCKERFILE
    assert "torch.__version__.startswith('2.13.0')" in DOCKERFILE


def test_dependencies_install_before_the_code_is_copied() -> None:
    """A code change must not reinstall 1.5 GB of dependencies: the requirements layer comes
    before `COPY app`, and the project itself installs without dependencies."""
    requirements = DOCKERFILE.index("pip install -r /tmp/requirements.txt")
    assert requirements < DOCKERFILE.index("COPY app ./app")
    assert re.search(r"^RUN pip install --no-deps \. ", DOCKERFILE, flags=re.M)
    assert '["optional-dependencies"]["local"]' in DOCKERFILE


def test_dependencies_take_the_tested_versions() -> None:
    """The image installs what the tests passed with: constraints.txt, copied in before the
    requirements layer, as scripts/_env.sh (serve, test, CI) installs from it."""
    assert re.search(r"^COPY pyproject\.toml constraints\.txt \./$", DOCKERFILE, flags=re.M)
    assert "pip install -r /tmp/requirements.txt -c constraints.txt" in DOCKERFILE
    env_sh = (ROOT / "scripts" / "_env.sh").read_text()
    assert 'LOCK="$ROOT/constraints.txt"' in env_sh
    assert '_pip -c "$LOCK" -e "$ROOT[$extras]"' in env_sh


def test_the_image_installs_the_wheel_setup_py_describes() -> None:
    """Every folder setup.py maps into the wheel is copied in; the client comes inside the
    service's wheel, not as a second install; the build stops unless `rag` runs and every
    requirement is met."""
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, flags=re.M)
    sources = {source for line in copied for source in line.split()}
    assert {"setup.py", "app", "migrations", "clients/python/rag_client"} <= sources
    setup_py = (ROOT / "setup.py").read_text()
    for folder in re.findall(r'": "([\w/]+)"', setup_py):
        assert folder in sources, folder
    assert "./clients/python" not in DOCKERFILE.replace("./clients/python/rag_client", "")
    builder = DOCKERFILE.split(" AS runtime", 1)[0]
    assert "pip check" in builder
    assert "import app.db.migrations, rag_client, torch" in builder
    assert re.search(r"&& rag --version$", builder, flags=re.M)


def test_build_context_leaves_out_what_the_image_does_not_need() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests", "bench"} <= set(ignored)


def test_citus_image_adds_the_same_pgvector_release() -> None:
    citus = (ROOT / "deploy" / "citus" / "Dockerfile").read_text()
    [base] = _from_lines(citus)
    assert re.fullmatch(r"citusdata/citus:\d+\.\d+\.\d+", base), base
    [version] = re.findall(r"^ARG PGVECTOR_VERSION=(\S+)$", citus, flags=re.M)
    compose = (ROOT / "docker-compose.yml").read_text()
    assert f"pgvector/pgvector:{version}-pg18" in compose
