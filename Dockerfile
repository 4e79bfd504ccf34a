# syntax=docker/dockerfile:1
# Multi-stage build: dependencies in a builder venv, a slim non-root runtime.
# The base image is pinned to a patch release; both stages use the same one, since the venv's
# interpreter is a symlink to the base image's python.
ARG PYTHON_IMAGE=python:3.11.15-slim-trixie

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# torch pinned and from the CPU index: the default index brings several GB of CUDA packages.
RUN pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
# The dependencies alone first, read from pyproject.toml: this layer (about 1.5 GB) is rebuilt
# when the dependencies change, not on every change to the code.
COPY pyproject.toml ./
COPY clients/python/pyproject.toml ./clients/python/pyproject.toml
RUN python - <<'EOF' > /tmp/requirements.txt
import tomllib
service = tomllib.load(open("pyproject.toml", "rb"))["project"]
client = tomllib.load(open("clients/python/pyproject.toml", "rb"))["project"]
print("\n".join(service["dependencies"] + service["optional-dependencies"]["local"]
                + client["dependencies"]))
EOF
RUN pip install -r /tmp/requirements.txt
COPY README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
COPY clients/python ./clients/python
RUN pip install --no-deps . ./clients/python \
    && python -c "import app, rag_client, migrations, torch; assert torch.__version__.startswith('2.13.0')"

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    RAG_DATA_DIR=/var/lib/rag
RUN groupadd --system rag && useradd --system --gid rag --home-dir /var/lib/rag --create-home rag
COPY --from=builder /opt/venv /opt/venv
USER rag
WORKDIR /var/lib/rag
EXPOSE 8000
# uvicorn finishes in-flight requests on SIGTERM (docker stop, compose down)
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
CMD ["rag", "serve", "--host", "0.0.0.0", "--port", "8000"]
