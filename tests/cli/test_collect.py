"""Which files `rag ingest FOLDER` picks up: every file, the service judging its type, but
not the lock files Office leaves beside an open document."""

from __future__ import annotations

from pathlib import Path

from app.cli.files import collect
from tests.ingest.office import docx_bytes, epub_bytes, odt_bytes, pptx_bytes, xlsx_bytes


def test_a_folder_of_office_files_is_collected_without_their_lock_files(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    (folder / "decks").mkdir(parents=True)
    files = {
        "handbook.docx": docx_bytes(),
        "decks/review.pptx": pptx_bytes(),
        "stock.xlsx": xlsx_bytes(rows=2),
        "guide.epub": epub_bytes(),
        "burrows.odt": odt_bytes(),
        "~$handbook.docx": b"\x05tester" + b"\x00" * 155,  # Word's lock file
        ".~lock.burrows.odt#": b"tester,host,2026",  # LibreOffice's
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)

    found = collect([folder])

    assert [f.external_id for f in found] == [
        "burrows.odt",
        "decks/review.pptx",
        "guide.epub",
        "handbook.docx",
        "stock.xlsx",
    ]
