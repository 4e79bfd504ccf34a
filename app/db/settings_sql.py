"""Transaction-local settings as SQL text: the one builder of the message that opens a tenant
transaction, for both ways of opening one (tenancy.py's session hook, scoped.py's direct path).

Plain settings (the tenant, who reads, `hnsw.ef_search` when it is a number, ...) are
`SET LOCAL name = 'value'` statements: on Citus (docs/operations.md, "Sharding by tenant on
Citus") the coordinator forwards SET LOCAL statements, and only those, to the workers of the
transaction (`citus.propagate_set_commands = local`); a `set_config()` call is a function the
coordinator evaluates for itself, so the workers would see no tenant (no rows: fail closed).

They are sent inside one DO block rather than as top-level statements of the message. Citus
forwards the *query string* of the SET statement it sees (`PostprocessVariableSetStmt(setStmt,
queryString)`, commands/variableset.c, called from utility_hook.c), and PostgreSQL hands a
top-level statement of a multi-statement message the whole message as its query string: every
worker would run the whole message (its BEGIN and every SET) once per SET LOCAL in it.
PL/pgSQL runs each statement of the block through SPI, which passes that statement's own text;
Citus' utility hook forwards a SET whatever the context it runs in (`citus_ProcessUtilityInternal`;
`IsMultiStatementTransaction` counts a DO block), so each SET LOCAL reaches the workers as
itself, and nothing else does. SET LOCAL in a DO block
without an exception clause lasts until the transaction ends, as at top level. On one server
the block costs about what top-level statements would (`python -m bench.scope_bench`, PostgreSQL
CPU a transaction: 53 µs against 43 for five plain values; 63 against 73 with a computed
`hnsw.ef_search`, which a top-level SELECT must plan), so both servers get the same message.

Computed values (`Computed`: an SQL expression, e.g. `hnsw.ef_search` from the number of
the tenant's chunks) are SET LOCAL statements too, run by EXECUTE in the same block, since SET
takes no expression: the value is worked out on the server where the message arrives (the
coordinator, on Citus), and the SET LOCAL that carries it is forwarded like the others.

A simple-protocol message carries no bound parameters, so values are inlined as SQL string
literals: `sql_literal` doubles quotes and refuses NUL, which PostgreSQL text cannot hold;
backslashes are plain characters because every connection runs with
`standard_conforming_strings = on` (engine.py sets it at connect). The block's body is itself
such a literal, so a value is quoted twice, each time by the same rule. Setting names are
ours, never a caller's, and must match `NAME` all the same: a name is SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

NAME = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?")


@dataclass(frozen=True, slots=True)
class Computed:
    """A setting's value that the server works out as the transaction begins, in the same
    message: `sql` is an SQL expression of type text, built by our own code from constants
    and identifiers we made (never from a caller's input).

    With `when` (an SQL condition of the same make), `sql` is worked out only when `when`
    holds, and the setting is the constant `otherwise` when it does not. PL/pgSQL evaluates
    the condition where the message arrives: on Citus, a condition on the coordinator's own
    catalog (`to_regclass(...)`) stays there, and only a value that needs the tenant's rows
    costs a trip to its worker."""

    sql: str
    when: str | None = None
    otherwise: str = ""


Setting = str | Computed


def sql_literal(value: str) -> str:
    """`value` as a standard-conforming SQL string literal."""
    if "\x00" in value:
        raise ValueError("a NUL character cannot be sent to PostgreSQL")
    return "'" + value.replace("'", "''") + "'"


def text_array_literal(values: Iterable[str]) -> str:
    """`values` as a PostgreSQL text[] literal (`{"a","b \\"c\\""}`): each element quoted, its
    backslashes and double quotes escaped."""
    quoted = ('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values)
    return "{" + ",".join(quoted) + "}"


def _computed(name: str, value: Computed) -> str:
    execute = f"EXECUTE format('SET LOCAL {name} = %L', ({value.sql}));"
    if value.when is None:
        return execute
    return (
        f"IF {value.when} THEN {execute}"
        f" ELSE SET LOCAL {name} = {sql_literal(value.otherwise)}; END IF;"
    )


def setting_name(name: str) -> str:
    """`name`, when it is a plain (optionally two-part) lower-case identifier."""
    if not NAME.fullmatch(name):
        raise ValueError(f"not a setting name: {name!r}")
    return name


def scope_message(begin: str | None, settings: Mapping[str, Setting]) -> str:
    """`begin` (BEGIN, a SAVEPOINT, or None inside a transaction already begun) and every
    transaction-local setting, as one simple-protocol message: a DO block of SET LOCAL
    statements, the plain values first (the tenant among them, which a computed value may
    need to read its rows), then the computed ones through EXECUTE."""
    plain = [
        f"SET LOCAL {setting_name(name)} = {sql_literal(value)};"
        for name, value in settings.items()
        if not isinstance(value, Computed)
    ]
    computed = [_computed(setting_name(name), value) for name, value in settings.items()
                if isinstance(value, Computed)]  # fmt: skip
    statements = [begin] if begin else []
    if plain or computed:
        statements.append("DO " + sql_literal(" ".join(["BEGIN", *plain, *computed, "END"])))
    return "; ".join(statements)
