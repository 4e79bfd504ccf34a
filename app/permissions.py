"""Document permissions inside a tenant: principals, access lists and who reads.

A document's `access` lists the principals who may see it: `user:<sub>` (a token's subject)
and `group:<name>` (an entry of the token's groups claim). An empty list means every member
of the tenant. Row-level security enforces it (migration 0008): the caller's `Readers` are
set transaction-locally beside the tenant (app/db/tenancy.py), so every query of every path
sees only what the caller may see. No FastAPI and no database here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

USER_PREFIX = "user:"
GROUP_PREFIX = "group:"
MAX_ACCESS_PRINCIPALS = 16
MAX_PRINCIPAL_CHARS = 128
# A kind, then a name without control characters and without surrounding whitespace.
_NAME_PATTERN = r"[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f\s])?"
_PRINCIPAL = re.compile(r"(?:user|group):" + _NAME_PATTERN)
_NAME = re.compile(_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class Readers:
    """Whose eyes a transaction reads with: principals, or every document of the tenant."""

    principals: frozenset[str] = frozenset()
    all_documents: bool = False

    @classmethod
    def of(cls, *, subject: str, groups: Iterable[str], all_documents: bool) -> Readers:
        principals = {USER_PREFIX + subject, *(GROUP_PREFIX + g for g in groups)}
        return cls(frozenset(principals), all_documents)

    def to_json(self) -> dict[str, object]:
        return {"principals": sorted(self.principals), "all_documents": self.all_documents}

    @classmethod
    def from_json(cls, value: object) -> Readers:
        """As `to_json` wrote them; anything else reads as no readers (fail closed)."""
        if not isinstance(value, dict):
            return cls()
        principals = value.get("principals")
        if not isinstance(principals, list) or not all(isinstance(p, str) for p in principals):
            principals = []
        return cls(frozenset(principals), value.get("all_documents") is True)

    def may_see(self, access: Iterable[str]) -> bool:
        """The rule the policies apply, for checks before a write."""
        listed = set(access)
        return not listed or self.all_documents or not listed.isdisjoint(self.principals)


# Only documents without an access list: what a transaction that names no readers sees.
NO_READERS = Readers()
# Every document of the tenant: maintenance (reindex, statistics, counters) and operators.
EVERY_DOCUMENT = Readers(all_documents=True)


def is_group_name(value: str) -> bool:
    """A groups-claim entry that can become `group:<value>`."""
    return len(GROUP_PREFIX) + len(value) <= MAX_PRINCIPAL_CHARS and bool(_NAME.fullmatch(value))


def principal_problem(value: str) -> str | None:
    """Why `value` cannot stand in an access list, or None."""
    if len(value) > MAX_PRINCIPAL_CHARS:
        return f"a principal has at most {MAX_PRINCIPAL_CHARS} characters"
    if not _PRINCIPAL.fullmatch(value):
        return "a principal is 'user:<subject>' or 'group:<name>' (no control characters)"
    return None


def normalized_access(values: Iterable[str]) -> tuple[str, ...]:
    """An access list as stored: distinct principals, sorted (so equal sets are equal lists).
    ValueError naming the first problem."""
    found = sorted(set(values))
    if len(found) > MAX_ACCESS_PRINCIPALS:
        raise ValueError(f"an access list holds at most {MAX_ACCESS_PRINCIPALS} principals")
    for value in found:
        if (problem := principal_problem(value)) is not None:
            raise ValueError(f"{problem}: {value!r}")
    return tuple(found)
