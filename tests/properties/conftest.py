"""The `thorough` hypothesis profile: `pytest tests/properties --hypothesis-profile=thorough`.

Registered here because hypothesis loads the profile named on the command line when pytest
configures it, before any test module is imported (and only then does the package's
`examples` read it). The other suites never load it, so their settings stay their own.
"""

from __future__ import annotations

from hypothesis import settings

from tests.properties import THOROUGH

settings.register_profile(THOROUGH, deadline=None, database=None, print_blob=True)
