"""Hypothesis properties of the pure domain code: parsers, chunker, citations, filters.

No database: each property calls domain functions on generated input and states what always
holds (a document or one of the documented errors, chunks that cover the text in order,
citations in their documented shape, filters that compile or are refused). A failing example
hypothesis found in code that is not fixed yet stays as an explicit `xfail(strict=True)` test
beside the property, so the fix turns it into a failure that asks for the xfail to go.

Example counts are per property and small: the whole package runs in well under a minute on a
shared machine. For a deeper run, load the `thorough` profile (twenty times the examples):
`pytest tests/properties --hypothesis-profile=thorough`.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

THOROUGH = "thorough"  # registered in conftest.py, which pytest reads before hypothesis
THOROUGH_FACTOR = 20


def examples(count: int) -> settings:
    """Settings for one property: `count` examples (times 20 under the `thorough` profile).

    No deadline (the machine is shared and timings are noisy), no example database (nothing is
    written under the work tree), and no too_slow health check: a PDF or a split is slow.
    """
    factor = THOROUGH_FACTOR if settings.get_current_profile_name() == THOROUGH else 1
    return settings(
        max_examples=count * factor,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
