# Shared by scripts/serve, scripts/test and scripts/lock: one virtualenv in .venv with the
# project installed, at the versions constraints.txt names (the ones the tests passed with;
# scripts/lock refreshes it). It is (re)installed only when pyproject.toml, setup.py or
# constraints.txt changed or a caller needs extras it lacks, so serve and test share it. torch
# is pinned to 2.13.0 (a CPU build). Each stage prints one line with its time, so a first start
# (about 4 minutes, about 1.7 GB) is never a silent wait.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RAG_VENV:-$ROOT/.venv}"
LOCK="$ROOT/constraints.txt"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

_stage_started=0
stage() { _stage_started=$SECONDS; printf '%s ... ' "$1" >&2; }
stage_done() { printf 'done in %ss\n' "$((SECONDS - _stage_started))" >&2; }

# pip install, quiet but for its errors; a failed install fails the caller (pipefail).
_pip() {
  "$VENV/bin/python" -m pip install -q "$@" 2>&1 | { grep -v "is ignored" >&2 || true; }
}

# True when a stamp for these files ($2, their hash) lists every extra in $1 (comma separated).
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

# Tesseract and its English data (Debian's tesseract-ocr, tesseract-ocr-eng), which read scanned
# PDF pages (app/ingest/parsing/ocr.py), installed as root on a machine with apt-get; elsewhere
# a scanned page is a 422 saying OCR is not installed (install them, or set TESSDATA_PREFIX).
ensure_ocr() {
  if ! command -v tesseract >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing tesseract-ocr tesseract-ocr-eng" >&2
    apt-get update -qq >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null
  fi
}

ensure_venv() {
  local extras="$1" hash have
  local python="${PYTHON:-python3}"
  hash="$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" "$LOCK" | sha256sum | cut -c1-16)"
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
  _pip --upgrade pip || echo "(pip not upgraded; going on with $("$VENV/bin/python" -m pip -V | cut -d' ' -f1-2))" >&2
  # torch first and exactly pinned: any other version drags in gigabytes of CUDA packages.
  _pip -c "$LOCK" "torch==2.13.0"
  stage_done
  stage "installing the service with extras [$extras]"
  if ! _pip -c "$LOCK" -e "$ROOT[$extras]"; then
    echo "the install from constraints.txt failed; if pyproject.toml's dependencies changed," \
      "refresh it with scripts/lock" >&2
    return 1
  fi
  # rag_client (clients/python) comes with the service: `rag … --url` talks through it
  "$VENV/bin/python" -c "import app, rag_client, torch; assert torch.__version__.startswith('2.13.0')"
  stage_done
  rm -f "$VENV"/.installed-*
  touch "$VENV/.installed-$hash-$extras"
}
