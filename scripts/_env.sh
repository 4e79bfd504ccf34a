# Shared by scripts/serve and scripts/test: one virtualenv in .venv with the project installed.
# It is (re)installed only when a pyproject.toml changed or a caller needs extras it lacks, so
# serve and test share it. torch is pinned to 2.13.0 (a CPU build). Each stage prints one line
# with its time, so a first start (about 4 minutes, about 1.7 GB) is never a silent wait.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RAG_VENV:-$ROOT/.venv}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

_stage_started=0
stage() { _stage_started=$SECONDS; printf '%s ... ' "$1" >&2; }
stage_done() { printf 'done in %ss\n' "$((SECONDS - _stage_started))" >&2; }

_pip() {
  "$VENV/bin/python" -m pip install -q "$@" 2>&1 | grep -v "is ignored" >&2 || true
}

# True when a stamp for this pyproject.toml lists every extra in $1 (comma separated).
_installed() {
  local wanted="$1" stamp extra
  for stamp in "$VENV"/.installed-"$2"-*; do
    [ -f "$stamp" ] || continue
    for extra in ${wanted//,/ }; do
      [[ ",${stamp##*-}," == *",$extra,"* ]] || continue 2
    done
    return 0
  done
  return 1
}

ensure_venv() {
  local extras="$1" hash have
  local python="${PYTHON:-python3}"
  hash="$(cat "$ROOT/pyproject.toml" "$ROOT/clients/python/pyproject.toml" | sha256sum | cut -c1-16)"
  _installed "$extras" "$hash" 2>/dev/null && return 0
  if [ ! -x "$VENV/bin/python" ]; then
    echo "first run: building the environment in $VENV (about 4 minutes and 1.7 GB, once)" >&2
    stage "creating the virtualenv"
    "$python" -m venv "$VENV"
    stage_done
  fi
  # Keep the extras an earlier install had: serve after test must not drop the test tools.
  have="$( (ls "$VENV"/.installed-* 2>/dev/null || true) | sed 's/.*-//' | tr '\n' ',')"
  extras="$(printf '%s' "$have,$extras" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -)"
  stage "installing pip and torch 2.13.0 (CPU)"
  _pip --upgrade pip
  # torch first and exactly pinned: any other version drags in gigabytes of CUDA packages.
  _pip "torch==2.13.0"
  stage_done
  stage "installing the service with extras [$extras]"
  _pip -e "$ROOT[$extras]"
  # the Python client (clients/python): the CLI talks to a running service through it
  _pip -e "$ROOT/clients/python"
  "$VENV/bin/python" -c "import app, rag_client, torch; assert torch.__version__.startswith('2.13.0')"
  stage_done
  rm -f "$VENV"/.installed-*
  touch "$VENV/.installed-$hash-$extras"
}
