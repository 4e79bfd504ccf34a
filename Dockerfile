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
# The dependencies alone first, read from pyproject.toml, at the versions constraints.txt names
# (those the tests passed with; scripts/lock refreshes it): this layer (about 1.5 GB) is
# rebuilt when they change, not on every change to the code.
COPY pyproject.toml constraints.txt ./
RUN python - <<'EOF' > /tmp/requirements.txt
import tomllib
service = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(service["dependencies"] + service["optional-dependencies"]["local"]))
EOF
RUN pip install -r /tmp/requirements.txt -c constraints.txt
# The service's wheel holds app, its migrations and the client that `rag --url` talks through
# (setup.py); every dependency is already there, so it installs without them.
COPY README.md alembic.ini setup.py ./
COPY app ./app
COPY migrations ./migrations
COPY clients/python/rag_client ./clients/python/rag_client
RUN pip install --no-deps . \
    && pip check \
    && python -c "import app.db.migrations, rag_client, torch; assert torch.__version__.startswith('2.13.0')" \
    && rag --version

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    RAG_DATA_DIR=/var/lib/rag
# Scanned PDF pages are read by OCR (app/ingest/parsing/ocr.py): Tesseract's engine comes with
# the tesserocr wheel, its English language data from Debian.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        tesseract-ocr tesseract-ocr-eng \
    && rm -rf /var/lib/apt/lists/*
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
