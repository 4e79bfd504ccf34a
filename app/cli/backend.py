"""Where a data command's question is answered, behind one interface: in this process on the
configured database and model (app/cli/local.py), or by a running service through the Python
client (`--url`, app/cli/remote.py). Both take the door-neutral inputs of app/inputs, which
the command builds once from its options, and answer with the Python client's models.

Light at module level (typer only): the command imports this when it runs, and the remote
path never imports the database layer or the model.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from app.cli.options import fail, remote, required_tenant

if TYPE_CHECKING:
    import rag_client
    from pydantic import BaseModel

    from app.inputs.search import ContextInput, SearchInput
    from app.inputs.similar import DedupeInput, SimilarInput

T = TypeVar("T")
M = TypeVar("M", bound="BaseModel")
# An input field's option when it is not `--` and the field's name with dashes.
OPTION_NAMES = {
    "query": "the query",
    "collections": "--collection",
    "similarity_threshold": "--threshold",
}


@dataclass(frozen=True, slots=True)
class TextDocument:
    """A text document to ingest (`rag eval`'s corpus): the same external id again updates it."""

    content: str
    external_id: str
    collection: str
    title: str | None = None


class Backend(Protocol):
    """The questions a data command asks, the same in process and over HTTP."""

    async def search(self, asked: SearchInput) -> rag_client.SearchResult: ...

    async def context(self, asked: ContextInput) -> rag_client.ContextResult: ...

    async def similar(
        self, item_id: uuid.UUID, asked: SimilarInput, *, chunk: bool
    ) -> rag_client.SimilarResult: ...

    async def dedupe(self, asked: DedupeInput) -> rag_client.DedupeResult: ...

    async def ingest_texts(self, documents: Sequence[TextDocument]) -> list[str]:
        """Ingest the documents as one batch; why each that failed did (none: all went)."""
        ...


def run(
    url: str | None,
    token: str | None,
    tenant: str | None,
    work: Callable[[Backend], Awaitable[T]],
) -> T:
    """`work` on the service `url` names, else in this process for `tenant` (required then);
    an error either one reports is one line and exit status 2."""
    if target := remote(url, token, tenant):
        from app.cli import remote as over_http

        return over_http.run(target, work)
    who = required_tenant(tenant)  # before the import: a missing --tenant fails at once
    from app.cli import local

    return local.run(who, work)


def asked(model: type[M], **options: Any) -> M:
    """The input `model` of the options given (None: left out, the default every door has);
    refused as every door refuses it, with the input's own message, naming the option."""
    from pydantic import ValidationError

    try:
        return model.model_validate(given(options))
    except ValidationError as error:
        fail("; ".join(refusal(e) for e in error.errors()))


def given(options: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in options.items() if value is not None}


def refusal(error: Mapping[str, Any]) -> str:
    """`invalid value for --top-k: Input should be less than or equal to 100`."""
    location = [str(part) for part in error.get("loc", ())]
    field = location[0] if location else ""
    option = OPTION_NAMES.get(field) or "--" + field.replace("_", "-")
    inner = ".".join(location[1:])
    return f"invalid value for {option}{f' ({inner})' if inner else ''}: {error.get('msg', '')}"
