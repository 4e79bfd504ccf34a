"""Who a tool call acts for, and the errors a tool call can end with.

A door admits the caller (MCP over HTTP: the bearer token, in api/mcp.py; over stdio: the
`--tenant` of `rag mcp`) and binds a `ToolAccess` for the duration of the request with
`acting(...)`; the SDK runs the tools in that context, so a tool reads it with `current()`.
Every tool call and resource read then passes `admitted()`: the tenant is still active (a
suspension takes effect within the tenant cache's seconds) and one request is spent from the
tenant's budget, the same budget as the HTTP API's. The access it returns holds sessions that
read as the caller (its principals: docs/PERMISSIONS.md), so no tool can read past them.

Errors: an `AppError` (unknown id, rate limit, a query too long) and a pydantic validation
error become the SDK's `ToolError`, so the client gets an `isError` result with a clear message
instead of a protocol error; anything unexpected is logged and reported by the SDK as a bare
"Error executing tool …", never with its text.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import ValidationError

from app.auth import SCOPE_SEARCH
from app.db.replicas import ReadConsistency
from app.errors import AppError, NotFound, Unauthenticated
from app.gate import Caller, authorize, spend
from app.ratelimit import Decision, raise_if_denied
from app.resources import Resources

P = ParamSpec("P")
R = TypeVar("R")
_current: ContextVar[ToolAccess] = ContextVar("rag_mcp_access")


@dataclass(frozen=True, slots=True)
class ToolAccess:
    caller: Caller
    resources: Resources
    on_decision: Callable[[Decision], None] | None = None  # HTTP: rate-limit headers
    # HTTP: the X-Read-Consistency header of the /mcp request; a tool's argument overrides it
    consistency: ReadConsistency = ReadConsistency.REPLICA


@contextmanager
def acting(access: ToolAccess) -> Iterator[None]:
    """Tool calls made inside this block act as `access.caller`."""
    token = _current.set(access)
    try:
        yield
    finally:
        _current.reset(token)


async def admitted() -> ToolAccess:
    """The bound access, once the tenant is checked and one request is spent; else an error."""
    try:
        access = _current.get()
    except LookupError:
        raise Unauthenticated("no caller: serve these tools through /mcp or `rag mcp`") from None
    principal, tenant_id = access.caller.principal, access.caller.tenant_id
    resources = access.resources
    caller = await authorize(resources, principal, scope=SCOPE_SEARCH, acting_for=tenant_id)
    decision = await spend(resources, caller)
    if access.on_decision is not None:
        access.on_decision(decision)
    raise_if_denied(decision)
    # Every tool reads as the caller: its sessions, and its reads on a replica, carry the
    # caller's principals.
    return ToolAccess(caller, caller.resources(resources), access.on_decision, access.consistency)


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Application and validation errors of a tool as tool errors the model can read."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except AppError as error:
            raise ToolError(error.detail) from error
        except ValidationError as error:
            raise ToolError(invalid_arguments(error)) from error

    return run


def resource_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Application errors of a resource read as the protocol errors the SDK defines."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except NotFound as error:
            raise ResourceNotFoundError(error.detail) from error
        except AppError as error:
            raise ResourceError(error.detail) from error

    return run


def invalid_arguments(error: ValidationError) -> str:
    """`invalid value for max_results: Input should be less than or equal to 100; …`"""
    problems = [
        f"{'.'.join(str(part) for part in e['loc']) or 'arguments'}: {e['msg']}"
        for e in error.errors()
    ]
    return "invalid value for " + "; ".join(problems)
