"""The shortfall a vector search tells from its own counts (shortfall.py), and when it leaves
the question to `explain_shortfall`'s statement."""

from __future__ import annotations

from app.retrieval.shortfall import Shortfall, ShortfallReason, threshold_shortfall


def test_enough_measured_means_the_threshold_kept_the_rest() -> None:
    assert threshold_shortfall(2, 40, 10, 0.5) == Shortfall(
        ShortfallReason.THRESHOLD, returned=2, in_scope=10, threshold=0.5
    )
    assert threshold_shortfall(0, 10, 10, 0.5) is not None


def test_the_counts_do_not_tell_or_there_is_no_shortfall() -> None:
    assert threshold_shortfall(10, 40, 10, 0.5) is None  # nothing missing
    assert threshold_shortfall(3, 40, 10, None) is None  # no threshold: the index stopped
    assert threshold_shortfall(3, 9, 10, 0.5) is None  # the scope may hold fewer than top_k
    assert threshold_shortfall(0, None, 10, 0.5) is None  # nothing passed: nothing counted
