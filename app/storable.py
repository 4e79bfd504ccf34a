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


# C0 and C1 controls (tab and newline among them), and the marks that reorder or redirect
# bidirectional text (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069): in a name shown to
# people or a line of the audit log they can hide or disguise what is written.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
UNPRINTABLE_REASON = "must not contain control characters or bidirectional text controls"


def printable(value: T) -> T:
    """`value` unchanged; ValueError when it holds a control character or a bidirectional
    text control (see `_UNPRINTABLE`), or anything the database cannot store."""
    if isinstance(value, str) and (reason := printable_reason(value)) is not None:
        raise ValueError(reason)
    return value


def printable_reason(value: str) -> str | None:
    """Why `value` is no text to show people or store, or None when it is."""
    if _UNPRINTABLE.search(value):
        return UNPRINTABLE_REASON
    return unstorable_reason(value)


def is_tenant_id(value: str) -> bool:
    return _TENANT_ID.fullmatch(value) is not None and value.isascii()


Storable = AfterValidator(storable)  # after any StringConstraints: Annotated[str, ..., Storable]
Printable = AfterValidator(printable)  # a name shown to people: storable, no controls
StorableText = Annotated[str, Storable]
