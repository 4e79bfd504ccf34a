# Shared by scripts/serve and scripts/test: a virtualenv in .venv with the project installed.
# Reinstalls only when a pyproject.toml changed. torch is pinned to 2.13.0 (a CPU build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RAG_VENV:-$ROOT/.venv}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

ensure_venv() {
  local extras="$1" stamp
  local python="${PYTHON:-python3}"
  [ -x "$VENV/bin/python" ] || "$python" -m venv "$VENV"
  stamp="$VENV/.installed-$(cat "$ROOT/pyproject.toml" "$ROOT/clients/python/pyproject.toml" | sha256sum | cut -c1-16)-$extras"
  if [ ! -f "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
    # torch first and exactly pinned: any other version drags in gigabytes of CUDA packages.
    "$VENV/bin/python" -m pip install -q "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
    "$VENV/bin/python" -m pip install -q -e "$ROOT[$extras]" 2>&1 | grep -v "is ignored" || true
    # the Python client (clients/python): the CLI talks to a running service through it
    "$VENV/bin/python" -m pip install -q -e "$ROOT/clients/python" 2>&1 | grep -v "is ignored" || true
    "$VENV/bin/python" -c "import app, rag_client, torch; assert torch.__version__.startswith('2.13.0')"
    rm -f "$VENV"/.installed-*
    touch "$stamp"
  fi
}
