"""Constants written into a compiled statement (app/db/statements.py)."""

from __future__ import annotations

from sqlalchemy import Integer, bindparam, column, literal, select, table

from app.db.statements import compiled, with_constants

ITEMS = table("items", column("id"), column("tenant"), column("score"))


def test_named_parameters_become_constants_and_the_rest_are_numbered_again() -> None:
    general = compiled(
        select(ITEMS.c.id, (literal(1.0) - ITEMS.c.score).label("s"))
        .where(ITEMS.c.tenant == bindparam("tenant"), ITEMS.c.score > bindparam("low"))
        .order_by(ITEMS.c.score - bindparam("low"))
        .limit(bindparam("limit", type_=Integer))
    )
    assert general.names == ("param_1", "tenant", "low", "limit")
    assert general.sql.count("$3") == 2
    special = with_constants(general, {"tenant": "it's; --", "limit": 7})
    assert "items.tenant = 'it''s; --'" in special.sql
    assert "LIMIT 7" in special.sql
    assert special.names == ("param_1", "low")  # "low", used twice, is $2 both times
    assert special.sql.count("$2") == 2
    assert "$3" not in special.sql
    assert special.arguments({"low": 0.5}) == [1.0, 0.5]
    assert special.columns == ("id", "s")
