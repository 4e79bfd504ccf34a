"""Search filter properties: whatever JSON a client sends as `filters` (and `collections`), the
request model refuses it with a validation error (a 422) or `conditions` builds SQL that
compiles for PostgreSQL, with parameters the database can store; never another exception.

The grammar (app/inputs/search.py): `metadata` maps a key to a scalar (equality), a list of
scalars (any of them) or a range object with `eq`, `in`, `gt`, `gte`, `lt`, `lte`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlalchemy import ColumnElement
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

from app.inputs.search import SearchInput as SearchIn
from app.operations.search import to_filters
from app.retrieval.filters import SearchFilters, conditions
from app.storable import unstorable_reason
from tests.properties import examples
from tests.properties.search_bodies import (
    BOUNDS,
    Condition,
    filters_like,
    json_values,
    metadata_filters,
    same_json,
    text_values,
    unstorable_bodies,
)

POSTGRESQL: Dialect = postgresql.dialect()  # type: ignore[no-untyped-call]


def compiled(condition: ColumnElement[bool]) -> tuple[str, dict[str, Any]]:
    """The SQL PostgreSQL would get, and its bound parameters."""
    sql = condition.compile(dialect=POSTGRESQL)
    return str(sql), dict(sql.params)


def strings(value: object) -> Iterator[str]:
    """Every string in a bound parameter, dictionary keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def assert_storable_sql(condition: ColumnElement[bool]) -> str:
    sql, params = compiled(condition)
    assert sql.strip()
    for value in params.values():
        if isinstance(value, dict):
            json.dumps(value, allow_nan=False)  # PostgreSQL's jsonb has no NaN or Infinity
        assert all(unstorable_reason(text) is None for text in strings(value))
    return sql


@examples(300)
@given(filters_like | json_values, st.none() | json_values)
def test_any_filters_are_refused_or_compile_with_storable_parameters(
    filters: object, collections: object
) -> None:
    body: dict[str, object] = {"query": "backups", "filters": filters}
    if collections is not None:
        body["collections"] = collections
    try:
        request = SearchIn.model_validate(body)
    except ValidationError:
        return

    for condition in conditions(to_filters(request)):
        _, params = compiled(condition)  # compiles, whatever was accepted
        for value in params.values():
            assert all(unstorable_reason(text) is None for text in strings(value))


# The grammar, generated: every key narrows the search, with the values and bounds given.


@examples(200)
@given(metadata_filters)
def test_each_metadata_key_of_the_grammar_becomes_its_own_conditions(
    metadata: dict[str, Condition],
) -> None:
    body = {"query": "backups", "filters": {"metadata": {k: v[0] for k, v in metadata.items()}}}

    filters = to_filters(SearchIn.model_validate(body))

    assert len(conditions(filters)) == sum(
        (any_of is not None) + bool(given_bounds) for _, any_of, given_bounds in metadata.values()
    )
    for key, (_, any_of, given_bounds) in metadata.items():
        condition = filters.metadata[key]
        assert json.dumps(condition.any_of) == json.dumps(any_of)
        assert dict(condition.bounds) == given_bounds
        own = conditions(SearchFilters(metadata={key: condition}))
        assert len(own) == (any_of is not None) + bool(given_bounds)
        for sql_condition in own:
            sql = assert_storable_sql(sql_condition)
            params = list(compiled(sql_condition)[1].values())
            if "@>" in sql:  # containment, one {key: value} document per value
                assert json.dumps(params) == json.dumps([{key: value} for value in any_of or []])
            else:  # a numeric range on the key
                assert {op for op, sign in BOUNDS.items() if f" {sign} %(" in sql} == set(
                    given_bounds
                )
                assert key in params
                numbers = sorted(p for p in params if isinstance(p, Decimal))
                assert numbers == sorted(Decimal(str(b)) for b in given_bounds.values())


@examples(100)
@given(
    st.lists(text_values.filter(bool), min_size=1, max_size=5),
    st.lists(st.sampled_from(["pdf", "html", "markdown", "text"]), min_size=1, max_size=4),
    st.lists(st.uuids(), min_size=1, max_size=5),
    st.sets(st.sampled_from(["collections", "source_types", "document_ids"])),
)
def test_scopes_become_one_condition_each(
    collections: list[str], source_types: list[str], document_ids: list[UUID], chosen: set[str]
) -> None:
    body: dict[str, Any] = {"query": "backups", "filters": {}}
    if "collections" in chosen:
        body["collections"] = collections
    if "source_types" in chosen:
        body["filters"]["source_types"] = source_types
    if "document_ids" in chosen:
        body["filters"]["document_ids"] = [str(i) for i in document_ids]

    found = conditions(to_filters(SearchIn.model_validate(body)))

    assert len(found) == len(chosen)
    for condition in found:
        _, params = compiled(condition)
        [values] = params.values()
        assert values in (collections, source_types, document_ids)
        assert_storable_sql(condition)


# NUL and lone surrogates: PostgreSQL cannot store them, so the model refuses them.


@examples(150)
@given(unstorable_bodies())
def test_nul_or_a_lone_surrogate_anywhere_in_the_filters_is_a_validation_error(
    body_and_field: tuple[dict[str, Any], str],
) -> None:
    body, field = body_and_field

    with pytest.raises(ValidationError) as refused:
        SearchIn.model_validate(body)

    assert all(error["loc"][0] == field for error in refused.value.errors())


# Bugs hypothesis found, fixed; each test keeps the case that showed it.


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SADeprecationWarning")
@pytest.mark.parametrize(
    "condition",
    [[], {"in": []}, {"eq": "a", "in": ["b"]}, {"in": None}, {"gt": None}],
    ids=["empty-list", "empty-in", "eq-outside-in", "null-in", "null-bound"],
)
def test_every_accepted_metadata_condition_narrows_the_search(condition: object) -> None:
    body = {"query": "backups", "filters": {"metadata": {"team": condition}}}
    try:
        request = SearchIn.model_validate(body)
    except ValidationError:
        return  # refusing it is fine too

    sqls = [compiled(condition)[0] for condition in conditions(to_filters(request))]
    assert sqls
    assert all(sql.strip() for sql in sqls)


def test_eq_and_in_compare_values_as_json() -> None:
    body = {"query": "q", "filters": {"metadata": {"team": {"eq": 1, "in": [True]}}}}

    any_of = to_filters(SearchIn.model_validate(body)).metadata["team"].any_of or []

    assert all(same_json(value, 1) for value in any_of)
