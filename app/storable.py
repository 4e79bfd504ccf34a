"""What the database can store, checked at the edge so bad input is a 4xx, never a 500.

PostgreSQL `text` and `jsonb` cannot hold NUL (U+0000), and asyncpg cannot encode a lone
surrogate (U+D800-U+DFFF, which JSON's `\\ud800` escapes can produce) as UTF-8: either one
reaching a query is an error from the driver. `StorableText` refuses both with a message the
request validation turns into a 422 naming the field; every text a request model, a query
parameter or an MCP tool passes to SQL uses it. Integers the database stores or compares are
bounded by `PG_INT_MAX` (int4) or smaller documented limits. A tenant id (a token's tenant
claim, an `X-Tenant-ID`, a path) must match `TENANT_ID_PATTERN`.
"""

from __future__ import annotations

import re
from typing import Annotated, TypeVar

from pydantic import AfterValidator

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
PG_INT_MAX = 2**31 - 1
MAX_OFFSET = 1_000_000  # every `offset` query parameter: deeper pages cost a scan each
T = TypeVar("T")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_TENANT_ID = re.compile(TENANT_ID_PATTERN)


def unstorable_reason(value: str) -> str | None:
    """Why PostgreSQL cannot store `value` as text, or None when it can."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "must not contain NUL characters (\\u0000)"
    return "must not contain lone surrogates (\\ud800-\\udfff): it is not valid Unicode text"


def storable(value: T) -> T:
    """`value` unchanged; ValueError (a 422 from a model) when the database cannot store it.
    Anything but a string (None of an optional field) passes: its own type rules apply."""
    if isinstance(value, str) and (reason := unstorable_reason(value)) is not None:
        raise ValueError(reason)
    return value


def is_tenant_id(value: str) -> bool:
    return _TENANT_ID.fullmatch(value) is not None and value.isascii()


Storable = AfterValidator(storable)  # after any StringConstraints: Annotated[str, ..., Storable]
StorableText = Annotated[str, Storable]
