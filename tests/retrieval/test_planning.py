"""The automatic ef_search keeps room for the rows a walk must return."""

from __future__ import annotations

from app.db.settings_sql import Computed
from app.retrieval.planning import EF_LARGEST, EF_SHARED, EF_STEPS, index_settings


def _automatic(fetching: int) -> Computed:
    ef = index_settings(None, "acme", fetching=fetching)["hnsw.ef_search"]
    assert isinstance(ef, Computed)
    return ef


def test_a_usual_search_keeps_the_size_rule() -> None:
    ef = _automatic(20)  # 4 x 20 results: below every step
    assert ef.otherwise == str(EF_SHARED)
    for _, value in EF_STEPS:
        assert f"then '{value}'" in ef.sql
    assert f"else '{EF_LARGEST}'" in ef.sql


def test_a_hundred_results_walk_with_four_times_as_many_candidates() -> None:
    ef = _automatic(100)
    assert ef.otherwise == "400"
    assert "then '400'" in ef.sql  # every step is raised
    assert f"else '{max(EF_LARGEST, 400)}'" in ef.sql


def test_a_given_ef_search_is_taken_as_it_is() -> None:
    assert index_settings(77, "acme", fetching=100)["hnsw.ef_search"] == "77"
