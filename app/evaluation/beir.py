"""A folder in BEIR format: queries.jsonl, qrels/<split>.tsv and, optionally, corpus.jsonl."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.errors import Unprocessable


@dataclass(frozen=True, slots=True)
class BeirDoc:
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class BeirSet:
    queries: dict[str, str]  # only the judged ones
    qrels: dict[str, dict[str, int]]  # query id -> document id -> grade
    corpus: list[BeirDoc] | None  # None: the documents are already in the tenant


def read_beir(folder: Path, *, split: str = "test", limit: int | None = None) -> BeirSet:
    """Queries with at least one judgment in `split` (the first `limit` of them, by id)."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for needed in (folder / "queries.jsonl", qrels_path):
        if not needed.is_file():
            raise Unprocessable(f"{needed} is missing (a BEIR folder has queries and qrels)")
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open() as lines:
        for number, line in enumerate(lines):
            parts = line.split()
            if number == 0 and parts and not parts[-1].lstrip("-").isdigit():
                continue  # the header
            if len(parts) < 3:
                continue
            query_id, doc_id, grade = parts[0], parts[-2], int(parts[-1])
            if grade > 0:
                qrels.setdefault(query_id, {})[doc_id] = grade
    with (folder / "queries.jsonl").open() as lines:
        texts = {(r := json.loads(line))["_id"]: r["text"] for line in lines if line.strip()}
    judged = sorted(q for q in qrels if q in texts)
    if limit is not None:
        judged = judged[:limit]
    corpus = None
    if (folder / "corpus.jsonl").is_file():
        with (folder / "corpus.jsonl").open() as lines:
            corpus = [
                BeirDoc(r["_id"], r.get("title") or "", r["text"])
                for line in lines
                if line.strip() and (r := json.loads(line))
            ]
    return BeirSet({q: texts[q] for q in judged}, {q: qrels[q] for q in judged}, corpus)
