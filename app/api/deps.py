"""Dependency wiring: typed aliases for what routes need."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.resources import Resources


def get_resources(request: Request) -> Resources:
    resources: Resources = request.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]
