"""Which files `rag ingest` sends, and the external id each gets."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SKIPPED_NAMES = {".git", ".venv", "node_modules", "__pycache__"}
# Word, PowerPoint and Excel leave a small lock file named "~$" + the document's name beside an
# open document: it is no document (LibreOffice's ".~lock.…#" is hidden already).
OFFICE_LOCK_PREFIX = "~$"


def content_version(data: bytes) -> str:
    """A file's version as `rag ingest` and `rag sync` store it: the hash of its bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: Path  # absolute, to read
    external_id: str  # relative to the folder given (or the file's name): never a local path
    size: int


def collect(paths: Iterable[Path]) -> list[SourceFile]:
    """The files named, and every file below the folders named (hidden ones and Office lock
    files skipped), whatever their extension: the service tells a file's type by its content
    (PDF, Word, PowerPoint, Excel, EPUB, ODT, markdown, HTML, text) and refuses the others.
    The external id is the path relative to the folder given, so ingesting again updates the
    same documents, from whichever machine or directory it runs."""
    found: list[SourceFile] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                _source(file, file.relative_to(path).as_posix())
                for file in sorted(path.rglob("*"))
                if file.is_file()
                and not file.name.startswith(OFFICE_LOCK_PREFIX)
                and not any(
                    part.startswith(".") or part in SKIPPED_NAMES
                    for part in file.relative_to(path).parts
                )
            )
        else:
            found.append(_source(path, path.name))
    return found


def _source(path: Path, external_id: str) -> SourceFile:
    return SourceFile(path.resolve(), external_id, path.stat().st_size)
