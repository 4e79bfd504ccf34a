# syntax=docker/dockerfile:1
# Multi-stage build: dependencies in a builder venv, a slim non-root runtime.

FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# torch pinned and from the CPU index: the default index brings several GB of CUDA packages.
RUN pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
COPY clients/python ./clients/python
RUN pip install ".[local]" ./clients/python

FROM python:3.11-slim AS runtime
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
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
CMD ["rag", "serve", "--host", "0.0.0.0", "--port", "8000"]
