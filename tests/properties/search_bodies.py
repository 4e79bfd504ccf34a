"""Search request bodies: arbitrary JSON where `filters` and `collections` go, metadata filters
drawn from the documented grammar (app/inputs/search.py) with what each should match, and
valid bodies with NUL or a lone surrogate slipped into one string.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from app.storable import unstorable_reason

BOUNDS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["pdf", "html", "\x00", "\ud800", "00000000-0000-0000-0000-000000000001"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
range_like = st.dictionaries(
    st.sampled_from([*BOUNDS, "eq", "in", "in_", "between"]), json_values, max_size=4
)
filters_like = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.dictionaries(st.text(max_size=8), json_values | range_like, max_size=4)
        | json_values,
        "source_types": st.lists(st.sampled_from(["pdf", "html", "markdown", "text", "doc"]))
        | json_values,
        "document_ids": st.lists(st.uuids().map(str) | json_scalars, max_size=3) | json_values,
        "colour": json_values,
    },
)


Scalar = str | int | float | bool | None
# (what the client sends for a key, the values it matches, the bounds it sets)
Condition = tuple[object, list[Scalar] | None, dict[str, float]]
text_values = st.text(max_size=40).filter(lambda text: unstorable_reason(text) is None)
scalars: st.SearchStrategy[Scalar] = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text_values
)
bounds = st.dictionaries(
    st.sampled_from(list(BOUNDS)), st.floats(allow_nan=False, allow_infinity=False), min_size=1
)


def json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, int | float) else type(value).__name__


def same_json(a: object, b: object) -> bool:
    """Equal as JSON values: `true` is not `1`, though True == 1 in Python."""
    return json_kind(a) == json_kind(b) and a == b


@st.composite
def ranges(draw: st.DrawFn) -> Condition:
    """A range object with the `any_of` values and bounds it stands for.

    With both `eq` and `in`, `in` holds `eq` and values Python finds unequal to it; `eq`
    missing from `in` (matches nothing) and `true` beside `eq: 1` have their own tests in
    test_filters.py.
    """
    given_bounds = draw(st.none() | bounds) or {}
    spec: dict[str, object] = dict(given_bounds)
    any_of: list[Scalar] | None = None
    kind = draw(
        st.sampled_from(["eq", "in", "both", "none"] if given_bounds else ["eq", "in", "both"])
    )
    eq = draw(scalars)
    if kind in ("eq", "both"):
        spec["eq"] = eq
        any_of = [eq]
    if kind in ("in", "both"):
        values = draw(st.lists(scalars, min_size=1, max_size=5))
        if kind == "both":
            values = [v for v in values if v != eq]
            values.insert(draw(st.integers(0, len(values))), eq)
        spec["in"] = values
        any_of = values if kind == "in" else [v for v in values if same_json(v, eq)]
    return spec, any_of, given_bounds


metadata_filters: st.SearchStrategy[dict[str, Condition]] = st.dictionaries(
    st.text(min_size=1, max_size=20).filter(lambda key: unstorable_reason(key) is None),
    st.one_of(
        scalars.map(lambda value: (value, [value], {})),
        st.lists(scalars, min_size=1, max_size=5).map(lambda values: (values, list(values), {})),
        ranges(),
    ),
    max_size=5,
)


@st.composite
def unstorable_bodies(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A valid body with NUL or a lone surrogate in one of its strings, and that field."""
    bad = draw(st.sampled_from(["\x00", "\ud800", "\udfff"]))
    text = draw(st.text(max_size=8).filter(lambda t: unstorable_reason(t) is None))
    at = draw(st.integers(0, len(text)))
    poisoned = text[:at] + bad + text[at:]
    place = draw(st.sampled_from(["key", "value", "in", "eq", "collection"]))
    choices: dict[str, dict[str, Any]] = {
        "key": {poisoned: "sre"},
        "value": {"team": poisoned},
        "in": {"team": {"in": ["sre", poisoned]}},
        "eq": {"team": {"eq": poisoned}},
        "collection": {"team": "sre"},
    }
    metadata = choices[place]
    body: dict[str, Any] = {"query": "backups", "filters": {"metadata": metadata}}
    if place == "collection":
        body["collections"] = ["handbook", poisoned]
    return body, "collections" if place == "collection" else "filters"
