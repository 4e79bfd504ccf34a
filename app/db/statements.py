"""Statements compiled once for the driver, and the same with some parameters written in.

A hot path sends a statement SQLAlchemy compiled once (`compiled`: positional `$n`
placeholders, asyncpg's dialect) straight to asyncpg, which prepares it once per connection.
`with_constants` writes some of its parameters in as SQL constants (strings quoted as
literals, integers as digits): the result is a statement of its own, whose generic plan sees
them, e.g. the tenant a partial index is for (app/retrieval/nearest.py). The rest keep their
names, numbered again in order of first use (a parameter used twice keeps one number).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from app.db.settings_sql import sql_literal

PLACEHOLDER = re.compile(r"\$(\d+)(::[A-Z]+)?")


@dataclass(frozen=True, slots=True)
class Compiled:
    sql: str
    names: tuple[str, ...]  # the positional parameters' names, in order
    defaults: dict[str, Any]  # the values compiled in (constants such as the 1.0 of 1 - d)
    columns: tuple[str, ...]  # the result columns' keys, in order

    def rows(self, records: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
        """The driver's records as dictionaries by the result columns' keys (a column's key
        may differ from its SQL name: `metadata_` is `metadata`)."""
        return [dict(zip(self.columns, record, strict=True)) for record in records]

    def arguments(self, values: dict[str, Any]) -> list[Any]:
        """The positional arguments: `values` over the compiled-in defaults."""
        merged = self.defaults | values
        return [merged[name] for name in self.names]


def compiled(stmt: Any) -> Compiled:
    """`stmt` (a SELECT with named bind parameters) compiled for asyncpg."""
    result = stmt.compile(dialect=asyncpg_dialect())  # type: ignore[no-untyped-call]
    return Compiled(
        sql=result.string,
        names=tuple(result.positiontup or ()),
        defaults=dict(result.params),
        columns=tuple(stmt.selected_columns.keys()),
    )


def with_constants(general: Compiled, constants: dict[str, str | int]) -> Compiled:
    """`general` with the parameters named in `constants` written in as SQL constants."""
    written = {
        name: str(int(value)) if isinstance(value, int) else sql_literal(value)
        for name, value in constants.items()
    }
    numbers: dict[str, int] = {}

    def replace(match: re.Match[str]) -> str:
        name = general.names[int(match.group(1)) - 1]
        if name in written:
            return written[name]
        return f"${numbers.setdefault(name, len(numbers) + 1)}{match.group(2) or ''}"

    sql = PLACEHOLDER.sub(replace, general.sql)
    return Compiled(sql, tuple(numbers), general.defaults, general.columns)
