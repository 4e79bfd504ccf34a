"""Ranked chunks as retrieval hands them to citations, and source URLs as the API takes them.

The chunks come from a pool where a chunk id always means the same chunk and a document id the
same title, type and URL; the ranked list repeats chunks and interleaves documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from app.api.documents_models import Url
from tests.citations import Chunk
from tests.properties.texts import odd_text, prose

URLS = TypeAdapter(Url)


def accepted_url(url: str) -> bool:
    """Whether POST /api/documents accepts `url` as a source_url."""
    try:
        URLS.validate_python(url)
    except ValidationError:
        return False
    return True


def url_texts(alphabet: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    schemes = st.sampled_from(["https", "http", "file", "s3"])
    rest = st.text(alphabet, min_size=1, max_size=30)
    return st.builds(lambda scheme, rest: f"{scheme}://{rest}", schemes, rest)


# Any URL the API accepts, and the awkward ones a library caller may pass (spaces, newlines …).
api_urls = url_texts(st.characters()).filter(accepted_url)
urls = st.none() | api_urls | odd_text(max_size=30)
source_types = st.sampled_from(
    ["pdf", "html", "markdown", "text", " PDF ", "docx", "pptx", " PPTX ", "xlsx", "rtf", ""]
)


@st.composite
def ranked_chunks(draw: st.DrawFn, *, max_chunks: int = 8) -> list[Chunk]:
    """Chunks of up to four documents, best first, some of them more than once."""
    documents = draw(st.lists(st.tuples(odd_text(), source_types, urls), min_size=1, max_size=4))
    pool = [
        Chunk(
            chunk_id=UUID(int=1000 + n),
            document_id=UUID(int=document),
            title=documents[document][0],
            content=draw(prose(max_fragments=30)),
            similarity=draw(st.floats(-1, 1)),
            source_type=documents[document][1],
            source_url=documents[document][2],
            page_number=draw(st.none() | st.integers(1, 2**31 - 1)),
            section=tuple(draw(st.lists(odd_text(max_size=12), max_size=3))),
            chunk_index=n,
        )
        for n, document in enumerate(
            draw(st.lists(st.integers(0, len(documents) - 1), min_size=1, max_size=max_chunks))
        )
    ]
    return draw(st.lists(st.sampled_from(pool), max_size=max_chunks + 4))


def first_seen(chunks: Sequence[Chunk]) -> list[Chunk]:
    """Each chunk once, where it first appears."""
    seen: dict[UUID, Chunk] = {}
    for chunk in chunks:
        seen.setdefault(chunk.chunk_id, chunk)
    return list(seen.values())
