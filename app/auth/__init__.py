"""Bearer JWT -> Principal(tenant_id, subject, scopes). No FastAPI here: `api/` wires it in."""

from app.auth.keys import AuthConfigError
from app.auth.tokens import (
    SCOPE_ADMIN,
    SCOPE_ALL_DOCUMENTS,
    SCOPE_INGEST,
    SCOPE_SEARCH,
    Principal,
    TokenVerifier,
    invalid_token,
    issue_token,
    principal_from_authorization,
)

__all__ = [
    "SCOPE_ADMIN",
    "SCOPE_ALL_DOCUMENTS",
    "SCOPE_INGEST",
    "SCOPE_SEARCH",
    "AuthConfigError",
    "Principal",
    "TokenVerifier",
    "invalid_token",
    "issue_token",
    "principal_from_authorization",
]
