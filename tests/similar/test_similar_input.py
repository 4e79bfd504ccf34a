"""The similar input every door builds (app/inputs/similar.py) checks its own fields, as its
siblings do: the same bounds as the HTTP parameters, the MCP tool's arguments and the command
line's options (tests/doors compares the doors' messages)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.inputs.similar import SimilarInput
from app.inputs.vocabulary import (
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_SIMILAR_TOP_K,
    MAX_SIMILAR_TOP_K,
    SearchScope,
)


def test_left_out_a_field_takes_the_default_every_door_has() -> None:
    asked = SimilarInput()
    assert (asked.top_k, asked.min_similarity) == (DEFAULT_SIMILAR_TOP_K, DEFAULT_MIN_SIMILARITY)
    assert (asked.scope, asked.exclude_same_document, asked.collections) == (
        SearchScope.CURRENT,
        True,
        None,
    )
    assert SimilarInput(top_k=MAX_SIMILAR_TOP_K, min_similarity=0.0).top_k == MAX_SIMILAR_TOP_K


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": MAX_SIMILAR_TOP_K + 1}, "top_k"),
        ({"min_similarity": 1.5}, "min_similarity"),
        ({"min_similarity": -0.1}, "min_similarity"),
        ({"min_similarity": float("nan")}, "min_similarity"),
        ({"scope": "everything"}, "scope"),
        ({"collections": [""]}, "collections"),
        ({"collections": ["a\x00b"]}, "collections"),
        ({"collections": [f"c{n}" for n in range(101)]}, "collections"),
        ({"search_scope": "all"}, "search_scope"),  # the wire's name is the door's to map
    ],
)
def test_a_bad_field_is_refused_by_name(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        SimilarInput.model_validate(fields)
    assert {str(e["loc"][0]) for e in refused.value.errors()} == {field}
