"""Bearer JWTs -> Principal: python-jose verification with the settings' keys and algorithms.

The token is parsed here (strict base64url, JSON header and payload) so that each rejection has a
precise reason (segments must be unpadded, canonical base64url, RFC 7515; the tenant claim a
tenant id and the subject printable text PostgreSQL can store (no NUL, control characters or
bidirectional text controls), so a strange one is a 401 before any query); the signature is
checked by the python-jose key bound to the header's algorithm, and only algorithms listed in
the settings are accepted. Reasons never quote the token or a key.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from jose import jwt
from jose.exceptions import JOSEError

from app.auth.keys import (
    HMAC_ALGORITHMS,
    AuthConfigError,
    VerificationKey,
    hmac_secret,
    key_id,
    load_keys,
)
from app.errors import Unauthenticated
from app.json_input import parse_json
from app.permissions import Readers, is_group_name
from app.settings import Settings
from app.storable import is_tenant_id, printable_reason

SCOPE_SEARCH = "rag:search"
SCOPE_INGEST = "rag:ingest"
SCOPE_ADMIN = "rag:admin"
# Sees every document of its tenant, whatever its access list (so does rag:admin):
# docs/PERMISSIONS.md says to whom to give it.
SCOPE_ALL_DOCUMENTS = "rag:all-documents"

_KEY_ID = re.compile(r"[0-9a-f]{8}")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")
_SCOPE_CLAIMS = ("scope", "scp", "scopes")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant the token acts for, its subject, scopes and groups."""

    tenant_id: str
    subject: str
    scopes: frozenset[str]
    groups: frozenset[str] = frozenset()
    # the token's `exp` (seconds since the epoch): when, not who, so not part of equality
    expires_at: float | None = field(default=None, compare=False)
    # the id of the key that verified the token (its `kid`), for the audit log
    key_id: str | None = field(default=None, compare=False)

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def readers(self) -> Readers:
        """The principals whose documents this caller may see (user:<sub>, group:<g>), or
        every document of the tenant for rag:all-documents and rag:admin."""
        everything = self.has_scope(SCOPE_ALL_DOCUMENTS) or self.has_scope(SCOPE_ADMIN)
        return Readers.of(subject=self.subject, groups=self.groups, all_documents=everything)


def invalid_token(reason: str) -> Unauthenticated:
    """A 401 for a token that was presented but cannot be accepted (RFC 6750 invalid_token)."""
    description = reason.replace('"', "'").replace("\\", "")
    challenge = f'Bearer error="invalid_token", error_description="{description}"'
    return Unauthenticated(f"invalid token: {reason}", headers={"WWW-Authenticate": challenge})


def principal_from_authorization(header_value: str | None, verifier: TokenVerifier) -> Principal:
    """The principal of an `Authorization: Bearer <token>` header; 401 when it is missing or bad."""
    scheme, _, token = (header_value or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated(
            "a bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return verifier.verify(token.strip())


class TokenVerifier:
    """Verifies bearer JWTs against configured keys; build it once, use it for every request."""

    def __init__(
        self,
        keys: Sequence[VerificationKey],
        *,
        audience: str | None = None,
        issuer: str | None = None,
        leeway_seconds: float = 0,
        tenant_claim: str = "tenant_id",
        groups_claim: str = "groups",
        max_token_bytes: int = 8192,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys = tuple(keys)
        self.algorithms = frozenset(key.algorithm for key in self._keys)
        self._audience, self._issuer = audience, issuer
        self._leeway, self._tenant_claim = leeway_seconds, tenant_claim
        self._groups_claim = groups_claim
        self._max_token_bytes, self._clock = max_token_bytes, clock

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenVerifier:
        """Load the keys the settings name; AuthConfigError when an algorithm has no key."""
        return cls(
            load_keys(settings),
            audience=settings.jwt_audience,
            issuer=settings.jwt_issuer,
            leeway_seconds=settings.jwt_leeway_seconds,
            tenant_claim=settings.jwt_tenant_claim,
            groups_claim=settings.jwt_groups_claim,
            max_token_bytes=settings.jwt_max_token_bytes,
        )

    def verify(self, token: str) -> Principal:
        """The token's principal, or Unauthenticated naming why the token is refused."""
        if len(token.encode("utf-8", "replace")) > self._max_token_bytes:
            raise invalid_token("token too large")
        header, payload, signing_input, signature = _split(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            raise invalid_token("unsupported algorithm")
        if "crit" in header:
            raise invalid_token("unsupported critical header")
        keys = self._candidates(algorithm, header.get("kid"))
        verified_by = next(
            (key for key in keys if _signature_matches(key, signing_input, signature)), None
        )
        if verified_by is None:
            raise invalid_token(_bad_signature(algorithm, header.get("kid")))
        try:
            claims = parse_json(payload)
        except ValueError:
            raise invalid_token("malformed token") from None
        if not isinstance(claims, dict):
            raise invalid_token("malformed token")
        self._check_times(claims)
        self._check_audience_and_issuer(claims)
        tenant_id = _required_string(claims, self._tenant_claim)
        if not is_tenant_id(tenant_id):
            raise invalid_token(f"invalid claim '{self._tenant_claim}'")
        subject = _required_string(claims, "sub")
        # it is stored (audit), shown and compared in SQL: no NUL, no controls, no bidi marks
        if printable_reason(subject) is not None:
            raise invalid_token("invalid claim 'sub'")
        return Principal(
            tenant_id=tenant_id,
            subject=subject,
            scopes=_scopes(claims),
            groups=_groups(claims, self._groups_claim),
            expires_at=_numeric_date(claims, "exp"),
            key_id=verified_by.kid,
        )

    def _candidates(self, algorithm: str, kid: object) -> list[VerificationKey]:
        """Keys for this algorithm chosen by `kid`; a lone key also serves a token without one."""
        if kid is not None and not isinstance(kid, str):
            raise invalid_token("malformed token")
        usable = [key for key in self._keys if key.algorithm == algorithm]
        lone = len(usable) == 1 and (kid is None or usable[0].kid in (None, kid))
        if algorithm in HMAC_ALGORITHMS or lone:
            return usable
        if kid is None:
            raise invalid_token("token has no key id (kid) and several keys are configured")
        chosen = [key for key in usable if key.kid == kid]
        if not chosen:
            raise invalid_token("unknown key id (kid)")
        return chosen

    def _check_times(self, claims: Mapping[str, object]) -> None:
        now, leeway = self._clock(), self._leeway
        if "exp" not in claims:
            raise invalid_token("missing claim 'exp'")
        if now >= _numeric_date(claims, "exp") + leeway:
            raise invalid_token("token expired")
        if "nbf" in claims and now + leeway < _numeric_date(claims, "nbf"):
            raise invalid_token("token not yet valid (nbf)")
        if "iat" in claims and now + leeway < _numeric_date(claims, "iat"):
            raise invalid_token("token issued in the future (iat)")

    def _check_audience_and_issuer(self, claims: Mapping[str, object]) -> None:
        if self._issuer is not None and _required_string(claims, "iss") != self._issuer:
            raise invalid_token("wrong issuer")
        if self._audience is None:
            return
        if "aud" not in claims:
            raise invalid_token("missing claim 'aud'")
        audiences = claims["aud"]
        audiences = [audiences] if isinstance(audiences, str) else audiences
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise invalid_token("invalid claim 'aud'")
        if self._audience not in audiences:
            raise invalid_token("wrong audience")


def issue_token(
    settings: Settings,
    *,
    tenant_id: str,
    subject: str,
    scopes: Iterable[str],
    ttl_seconds: int,
    groups: Iterable[str] = (),
    now: float | None = None,
) -> str:
    """A token signed with RAG_JWT_SECRET (HS256 unless only another HS* is allowed) for dev use."""
    secret = hmac_secret(settings)
    allowed = [alg for alg in settings.jwt_algorithms if alg in HMAC_ALGORITHMS]
    if not allowed:
        raise AuthConfigError(
            "RAG_JWT_ALGORITHMS allows no HS algorithm, so the service would refuse a token "
            "signed with RAG_JWT_SECRET"
        )
    if ttl_seconds <= 0:
        raise ValueError("ttl_seconds must be positive")
    issued_at = int(time.time() if now is None else now)
    claims: dict[str, object] = {
        settings.jwt_tenant_claim: tenant_id,
        "sub": subject,
        "scope": " ".join(sorted({s for scope in scopes for s in scope.split()})),
        "iat": issued_at,
        "exp": issued_at + ttl_seconds,
    }
    if chosen := sorted(set(groups)):
        bad = [g for g in chosen if not is_group_name(g)]
        if bad:
            raise ValueError(f"not a group name: {bad[0]!r}")
        claims[settings.jwt_groups_claim] = chosen
    if settings.jwt_audience is not None:
        claims["aud"] = settings.jwt_audience
    if settings.jwt_issuer is not None:
        claims["iss"] = settings.jwt_issuer
    algorithm = "HS256" if "HS256" in allowed else allowed[0]
    return jwt.encode(claims, secret.decode(), algorithm=algorithm, headers={"kid": key_id(secret)})


def _bad_signature(algorithm: str, kid: object) -> str:
    """Why the signature failed, in words a person can act on; never names the server's key."""
    if algorithm not in HMAC_ALGORITHMS:
        return "bad signature"
    ours = isinstance(kid, str) and _KEY_ID.fullmatch(kid) is not None  # never echo other input
    signer = f" (the token was signed with key id {kid})" if ours else ""
    return (
        f"bad signature: the token was not signed with this server's secret{signer}; "
        "tokens from `rag token` must use the server's RAG_JWT_SECRET or RAG_DATA_DIR, "
        "and the server logs its key id at start"
    )


def _split(token: str) -> tuple[dict[str, object], bytes, bytes, bytes]:
    """Header, payload, signing input and signature of a compact JWS; 401 when malformed."""
    parts = token.split(".")
    if len(parts) != 3 or not all(_SEGMENT.fullmatch(part) for part in parts) or not parts[0]:
        raise invalid_token("malformed token")
    try:
        header = parse_json(_b64decode(parts[0]))
        payload, signature = _b64decode(parts[1]), _b64decode(parts[2])
    except (ValueError, binascii.Error):
        raise invalid_token("malformed token") from None
    if not isinstance(header, dict):
        raise invalid_token("malformed token")
    return header, payload, f"{parts[0]}.{parts[1]}".encode("ascii"), signature


def _b64decode(segment: str) -> bytes:
    """Unpadded base64url only, in its one canonical spelling (RFC 7515 section 2): unused
    trailing bits set would make one token many strings, which deny-lists and caches keyed on
    the string could not recognise."""
    decoded = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    if base64.urlsafe_b64encode(decoded).rstrip(b"=").decode("ascii") != segment:
        raise ValueError("non-canonical base64url")
    return decoded


def _signature_matches(key: VerificationKey, signing_input: bytes, signature: bytes) -> bool:
    try:
        return bool(key.key.verify(signing_input, signature))
    except (JOSEError, ValueError, TypeError):
        return False


def _numeric_date(claims: Mapping[str, object], name: str) -> float:
    value = claims[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise invalid_token(f"invalid claim '{name}'")
    return float(value)


def _required_string(claims: Mapping[str, object], name: str) -> str:
    value = claims.get(name)
    if value is None:
        raise invalid_token(f"missing claim '{name}'")
    if not isinstance(value, str) or not value.strip():
        raise invalid_token(f"invalid claim '{name}'")
    return value


def _scopes(claims: Mapping[str, object]) -> frozenset[str]:
    """Scopes from `scope` (space-separated) and `scp`/`scopes` (a list, or a string too)."""
    scopes: set[str] = set()
    for name in _SCOPE_CLAIMS:
        value = claims.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            items: list[object] = [value]
        elif isinstance(value, list):
            items = value
        else:
            raise invalid_token(f"invalid claim '{name}'")
        if not all(isinstance(item, str) for item in items):
            raise invalid_token(f"invalid claim '{name}'")
        scopes.update(part for item in items for part in str(item).split())
    return frozenset(scopes)


def _groups(claims: Mapping[str, object], name: str) -> frozenset[str]:
    """The groups claim: absent is no group; anything but a list of group names is a 401
    (a caller whose groups cannot be read must not be treated as having none)."""
    value = claims.get(name)
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(
        isinstance(item, str) and is_group_name(item) for item in value
    ):
        raise invalid_token(f"invalid claim '{name}' (a list of group names)")
    return frozenset(value)
