"""The app with MCP reachable (tests/mcp's fixtures), and its resources for the in-process CLI."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from app.permissions import EVERY_DOCUMENT
from app.resources import Resources
from tests.conftest import resources_of
from tests.mcp.conftest import http, mcp_app, tenant

__all__ = ["http", "mcp_app", "operator", "tenant"]


@pytest.fixture
def operator(mcp_app: FastAPI) -> Resources:
    """The resources the HTTP and MCP doors use, reading as the command line's operator."""
    resources: Resources = resources_of(mcp_app)
    return resources.reading_as_caller(EVERY_DOCUMENT)
