"""What opening a tenant transaction costs PostgreSQL, by the form of the message that sets it.

Every search opens its transaction with one simple-protocol message: BEGIN and the
transaction-local settings (the tenant, who reads, the plan mode, `hnsw.ef_search` worked out
by the server, ...). app/db/settings_sql.py sends the settings as SET LOCAL statements inside
one DO block, which Citus needs (its docstring says why). On one server, top-level statements
would do as well; this bench measures whether they would be cheaper. Each form opens and
commits the same transaction N times on one connection, in turns, and the PostgreSQL
backend's CPU time (/proc, user + system) is divided by N:

- the DO block, as the service sends it;
- top-level SET LOCAL statements, the computed value by `set_config()` in a SELECT;
- one SELECT of `set_config()` calls for the plain values, one for the computed;
- BEGIN and COMMIT alone (the floor).

Each for two sets of settings: a cached vector search's (five plain values and the computed
`hnsw.ef_search`), and the same without the computed value. The forms' settings are checked
equal before timing. The backend must be on this machine (the embedded server, or a local
one given by RAG_BENCH_DATABASE_URL).

Run: `.venv/bin/python -m bench.scope_bench [-n 3000] [--rounds 7]`
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from collections.abc import Callable, Mapping

import asyncpg

from app.db.scoped import tenant_scope
from app.db.settings_sql import Computed, Setting, scope_message, setting_name, sql_literal
from app.retrieval import SearchRequest
from app.retrieval.planning import direct_settings
from bench.kit.database import bench_database, create_tenants
from bench.kit.report import log, print_table, write_json

TENANT = "acme"
BEGIN = "BEGIN READ ONLY"
# every setting as the transaction sees it, the custom ones (app.*) included
CHECK = "select name, current_setting(name, true) from unnest($1::text[]) name order by name"


def _value(value: Computed) -> str:
    if value.when is None:
        return f"({value.sql})"
    return f"CASE WHEN {value.when} THEN ({value.sql}) ELSE {sql_literal(value.otherwise)} END"


def _computed_select(settings: Mapping[str, Setting]) -> list[str]:
    calls = [
        f"set_config('{setting_name(name)}', {_value(value)}, true)"
        for name, value in settings.items()
        if isinstance(value, Computed)
    ]
    return ["SELECT " + ", ".join(calls)] if calls else []


def top_level(settings: Mapping[str, Setting]) -> str:
    plain = [
        f"SET LOCAL {setting_name(name)} = {sql_literal(value)}"
        for name, value in settings.items()
        if not isinstance(value, Computed)
    ]
    return "; ".join([BEGIN, *plain, *_computed_select(settings)])


def selects(settings: Mapping[str, Setting]) -> str:
    plain = [
        f"set_config('{setting_name(name)}', {sql_literal(value)}, true)"
        for name, value in settings.items()
        if not isinstance(value, Computed)
    ]
    return "; ".join([BEGIN, "SELECT " + ", ".join(plain), *_computed_select(settings)])


FORMS: dict[str, Callable[[Mapping[str, Setting]], str]] = {
    "DO block (as sent)": lambda settings: scope_message(BEGIN, settings),
    "top-level SET LOCAL": top_level,
    "SELECT set_config()": selects,
    "BEGIN alone": lambda settings: BEGIN,
}


def backend_cpu(pid: int) -> float:
    """Seconds of CPU the process has used (user + system)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    app_url: str, scopes: dict[str, dict[str, Setting]], n: int, rounds: int
) -> dict[tuple[str, str], list[float]]:
    messages = {
        (scope, form): make(settings)
        for scope, settings in scopes.items()
        for form, make in FORMS.items()
    }
    conn = await asyncpg.connect(app_url, server_settings={"standard_conforming_strings": "on"})
    try:
        pid = await conn.fetchval("select pg_backend_pid()")
        try:
            backend_cpu(pid)
        except FileNotFoundError:
            message = "the PostgreSQL backend is not on this machine: its CPU is not here"
            raise SystemExit(message) from None
        for scope, settings in scopes.items():
            seen = set()
            for form in FORMS:
                if form == "BEGIN alone":
                    continue
                await conn.execute(messages[scope, form])
                rows = await conn.fetch(CHECK, list(settings))
                await conn.execute("COMMIT")
                seen.add(tuple(tuple(row) for row in rows))
            if len(seen) != 1:
                raise SystemExit(f"the forms set different values: {seen}")
        times: dict[tuple[str, str], list[float]] = {key: [] for key in messages}
        keys = list(messages)
        for round_ in range(rounds):
            for key in keys[round_ % len(keys) :] + keys[: round_ % len(keys)]:
                started = backend_cpu(pid)
                for _ in range(n):
                    await conn.execute(messages[key])
                    await conn.execute("COMMIT")
                times[key].append((backend_cpu(pid) - started) / n * 1e6)
        return times
    finally:
        await conn.close()


async def main_async(n: int, rounds: int) -> None:
    async with bench_database() as db:
        await create_tenants(db.sessions, [TENANT])
        search = direct_settings(SearchRequest(query="-", top_k=5), TENANT, False, True)
        searched = tenant_scope(db.sessions, TENANT, search)
        plain: dict[str, Setting] = {
            name: value for name, value in searched.items() if not isinstance(value, Computed)
        }
        scopes: dict[str, dict[str, Setting]] = {
            "a cached vector search's": searched,
            "the same, no computed value": plain,
        }
        log(f"{len(FORMS)} forms x {len(scopes)} settings, {rounds} rounds of {n} transactions")
        url = db.app_url.replace("postgresql+asyncpg://", "postgresql://")
        times = await measure(url, scopes, n, rounds)
    medians = {key: statistics.median(values) for key, values in times.items()}
    print_table(
        f"PostgreSQL CPU µs a transaction (BEGIN, settings, COMMIT), medians of {rounds} rounds",
        ["settings", "form", "µs", "rounds"],
        [
            (
                scope,
                form,
                f"{medians[scope, form]:.0f}",
                " ".join(f"{t:.0f}" for t in times[scope, form]),
            )
            for scope, form in times
        ],
    )
    path = write_json(
        "scope",
        {
            "n": n,
            "rounds": rounds,
            "median_us": {f"{scope} | {form}": us for (scope, form), us in medians.items()},
        },
    )
    log(f"results in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-n", type=int, default=3000, help="transactions per form and round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main_async(args.n, args.rounds))


if __name__ == "__main__":
    main()
