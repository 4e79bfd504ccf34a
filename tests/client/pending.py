"""Client tests of endpoints built in parallel branches: they skip while the service lacks the
operation, and run as soon as it is merged (the lead checks that they do)."""

from __future__ import annotations

import pytest

from app.settings import Settings
from tests.client.schema_drift import openapi, operation


def requires(settings: Settings, method: str, path: str) -> None:
    if operation(openapi(settings), method, path) is None:
        pytest.skip(f"{method} {path} is not on this branch yet")
