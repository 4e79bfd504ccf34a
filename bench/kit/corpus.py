"""NFCorpus as the pipeline sees it: documents, queries, judgements, chunks, and the local
model's vectors behind a disk cache."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.embeddings.local import LocalEmbedder
from app.ingest.chunking import Chunker
from app.ingest.inputs import DocumentInput, prepare
from app.ingest.parsing import Parser, SourceType
from app.resources import build_chunker
from app.settings import Settings
from bench.kit.paths import NFCORPUS, RESULTS
from bench.kit.report import log


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    doc_id: str
    title: str
    text: str


def read_corpus(limit: int | None = None, root: Path = NFCORPUS) -> list[CorpusDoc]:
    docs: list[CorpusDoc] = []
    with (root / "corpus.jsonl").open() as lines:
        for line in lines:
            if limit is not None and len(docs) >= limit:
                break
            record = json.loads(line)
            docs.append(CorpusDoc(record["_id"], record.get("title") or "", record["text"]))
    return docs


def read_queries(root: Path = NFCORPUS) -> dict[str, str]:
    with (root / "queries.jsonl").open() as lines:
        return {(r := json.loads(line))["_id"]: r["text"] for line in lines}


def read_qrels(split: str = "test", root: Path = NFCORPUS) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels" / f"{split}.tsv").open() as lines:
        next(lines)  # header
        for line in lines:
            query_id, doc_id, score = line.split()
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    return qrels


def document_text(doc: CorpusDoc) -> str:
    """What gets ingested for a corpus document: "title\\n\\ntext" (NFCorpus titles are empty)."""
    return f"{doc.title}\n\n{doc.text}" if doc.title else doc.text


def corpus_input(doc: CorpusDoc, **extra: Any) -> DocumentInput:
    """A corpus document as the JSON ingest path receives it (plain text, id as external_id)."""
    return DocumentInput(
        content=document_text(doc),
        source_type=SourceType.TEXT,
        title=doc.title or None,
        external_id=doc.doc_id,
        **extra,
    )


@dataclass(frozen=True, slots=True)
class PreparedDoc:
    doc: CorpusDoc
    contents: list[str]  # chunk contents, as stored
    texts: list[str]  # what the pipeline embeds (title fallback + contextual header + chunk)
    token_counts: list[int]


def prepare_corpus(docs: Sequence[CorpusDoc], chunker: Chunker) -> list[PreparedDoc]:
    """Parse and chunk as `ingest_document` does (its own `prepare`, so the texts match)."""
    out = []
    for doc in docs:
        prepared = prepare(corpus_input(doc), chunker, Parser())
        out.append(
            PreparedDoc(
                doc,
                [d.content for d in prepared.drafts],
                prepared.texts,
                [d.token_count for d in prepared.drafts],
            )
        )
    return out


def vector_cache_path(model_id: str) -> Path:
    return RESULTS / f"embeddings-{model_id.replace(':', '_').replace('/', '_')}.npz"


class CachingEmbedder:
    """The local model behind a disk cache keyed by sha256(kind, model, text): the same
    vectors the model gives, without recomputing them on every run."""

    def __init__(self, inner: LocalEmbedder, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self.query_prefix = inner.query_prefix
        self.passage_prefix = inner.passage_prefix
        self.max_input_tokens = inner.max_input_tokens
        self.tokenizer_file = inner.tokenizer_file
        self.vectors: dict[str, np.ndarray] = {}
        self.added = 0
        if path.exists():
            data = np.load(path)
            self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def key(self, kind: str, text: str) -> str:
        return hashlib.sha256(f"{kind}\0{self.model_id}\0{text}".encode()).hexdigest()

    async def embed_query(self, text: str) -> list[float]:
        key = self.key("q", text)
        if key not in self.vectors:
            self.vectors[key] = np.asarray(await self.inner.embed_query(text), dtype=np.float32)
            self.added += 1
        result: list[float] = self.vectors[key].tolist()
        return result

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [self.key("d", t) for t in texts]
        missing = list(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self.vectors}.items()
        )
        for start in range(0, len(missing), 512):
            part = missing[start : start + 512]
            fresh = await self.inner.embed_documents([t for _, t in part])
            for (k, _), v in zip(part, fresh, strict=True):
                self.vectors[k] = np.asarray(v, dtype=np.float32)
            self.added += len(part)
            if len(missing) > 512:
                log(f"  embedded {min(start + 512, len(missing))}/{len(missing)} chunks")
                self.save()
        return [self.vectors[k].tolist() for k in keys]

    def save(self) -> None:
        if not self.added:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.vectors))
        vectors = np.stack(list(self.vectors.values())).astype(np.float32)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=vectors)
        tmp.replace(self.path)
        self.added = 0

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def cached_corpus(
    chunker: Chunker, embedder: LocalEmbedder, settings: Settings
) -> list[PreparedDoc]:
    """The corpus chunked as the pipeline does; the chunks cached as JSON (chunking takes ~30 s)
    under a key of what chunking depends on (model, chunk sizes, the model's input limit)."""
    key = json.dumps(
        [
            embedder.model_id,
            settings.chunk_tokens,
            settings.chunk_overlap_tokens,
            embedder.max_input_tokens,
        ]
    )
    path = RESULTS / f"nfcorpus-chunks-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
    docs = read_corpus()
    if path.exists():
        stored = json.loads(path.read_text())
        by_id = {d.doc_id: d for d in docs}
        return [PreparedDoc(by_id[r[0]], r[1], r[2], r[3]) for r in stored]
    log(f"chunking {len(docs)} NFCorpus documents (cached afterwards in {path.name})")
    prepared = prepare_corpus(docs, chunker)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps([[p.doc.doc_id, p.contents, p.texts, p.token_counts] for p in prepared])
    )
    return prepared


async def corpus_vectors(
    settings: Settings,
) -> tuple[LocalEmbedder, Chunker, CachingEmbedder, list[PreparedDoc], np.ndarray]:
    """The local model, its chunker, the embedder with its disk cache, NFCorpus chunked as the
    pipeline does and its chunk vectors (the rows every synthetic table is made from)."""
    log("loading the local model")
    local = LocalEmbedder.load(settings)
    chunker = build_chunker(settings, local)
    embedder = CachingEmbedder(local, vector_cache_path(local.model_id))
    corpus = cached_corpus(chunker, local, settings)
    texts = [t for p in corpus for t in p.texts]
    log(f"{len(corpus)} documents, {len(texts)} chunks; embedding the ones not cached")
    base = np.asarray(await embedder.embed_documents(texts), dtype=np.float32)
    embedder.save()
    return local, chunker, embedder, corpus, base


def query_pool(exclude: set[str]) -> list[str]:
    """Distinct NFCorpus query texts, test queries first."""
    texts = read_queries()
    test = set(read_qrels("test"))
    ordered = [texts[q] for q in texts if q in test] + [texts[q] for q in texts if q not in test]
    return [t for t in dict.fromkeys(ordered) if t not in exclude]
