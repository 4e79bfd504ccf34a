"""Verification keys from Settings: the HMAC secret, a PEM public key, a JWKS file.

Every key is bound to one algorithm when it is loaded, so the token header can only pick among
the configured (algorithm, key) pairs: the HMAC secret is the only HMAC key there is, and a public
key is never offered to HMAC (no algorithm confusion).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_public_key,
)
from jose import jwk
from jose.backends.base import Key
from jose.exceptions import JOSEError

from app.settings import Settings

logger = logging.getLogger(__name__)

HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512"})
EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_CURVE_NAMES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}
_MIN_SECRET_BYTES = 32
_JWK_MEMBERS = {"RSA": ("n", "e"), "EC": ("crv", "x", "y")}


class AuthConfigError(ValueError):
    """The token settings cannot work as configured (raised at start-up or by `issue_token`)."""


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """A key the verifier accepts, bound to the one algorithm it may verify."""

    algorithm: str
    kid: str | None
    key: Key


@dataclass(frozen=True, slots=True)
class _PublicKey:
    """Public key material before it is bound to an algorithm."""

    kid: str | None
    kty: str  # "RSA" or "EC"
    crv: str | None
    alg: str | None  # a JWK's own "alg" restricts it to that algorithm
    data: bytes | dict[str, str]

    def fits(self, algorithm: str) -> bool:
        if self.alg is not None and self.alg != algorithm:
            return False
        if algorithm in RSA_ALGORITHMS:
            return self.kty == "RSA"
        return self.kty == "EC" and EC_CURVES.get(algorithm) == self.crv


def load_keys(settings: Settings) -> list[VerificationKey]:
    """Every (algorithm, key) pair the settings allow; each configured algorithm needs a key."""
    publics = _public_keys(settings.jwt_public_key_file, settings.jwt_jwks_file)
    keys: list[VerificationKey] = []
    for algorithm in dict.fromkeys(settings.jwt_algorithms):
        if algorithm in HMAC_ALGORITHMS:
            secret = hmac_secret(settings)
            keys.append(VerificationKey(algorithm, key_id(secret), _construct(secret, algorithm)))
            continue
        matching = [p for p in publics if p.fits(algorithm)]
        if not matching:
            kind = "RSA" if algorithm in RSA_ALGORITHMS else f"EC {EC_CURVES.get(algorithm)}"
            raise AuthConfigError(
                f"RAG_JWT_ALGORITHMS lists {algorithm} but no {kind} public key is configured "
                "(RAG_JWT_PUBLIC_KEY_FILE or RAG_JWT_JWKS_FILE)"
            )
        keys.extend(
            VerificationKey(algorithm, p.kid, _construct(p.data, algorithm)) for p in matching
        )
    return keys


def hmac_secret(settings: Settings) -> bytes:
    """The configured HMAC secret, or AuthConfigError when there is none."""
    if settings.jwt_secret is None or not settings.jwt_secret.get_secret_value():
        raise AuthConfigError("RAG_JWT_SECRET is not set (needed for HS256/HS384/HS512 tokens)")
    secret = settings.jwt_secret.get_secret_value().encode()
    if len(secret) < _MIN_SECRET_BYTES:
        logger.warning("RAG_JWT_SECRET is shorter than %d bytes: easy to guess", _MIN_SECRET_BYTES)
    return secret


def key_id(secret: bytes) -> str:
    """A short public name for an HMAC secret (the `kid` of the tokens `rag token` signs).

    It lets a person tell which secret signed a token without revealing it: 8 hex digits of a
    domain-separated SHA-256, so two sides that disagree on the secret can see that they do.
    """
    return hashlib.sha256(b"rag-service key id\x00" + secret).hexdigest()[:8]


def hmac_key_source(settings: Settings) -> str | None:
    """Where the HMAC secret comes from and its key id, for people; None when there is none."""
    if settings.jwt_secret is None or not settings.jwt_secret.get_secret_value():
        return None
    secret = settings.jwt_secret.get_secret_value()
    file = settings.data_dir / "jwt-secret"
    from_file = file.is_file() and file.read_text().strip() == secret
    return f"{file if from_file else 'RAG_JWT_SECRET'} (key id {key_id(secret.encode())})"


def _construct(data: bytes | dict[str, str], algorithm: str) -> Key:
    try:
        return jwk.construct(data, algorithm)
    except (JOSEError, ValueError, TypeError):
        raise AuthConfigError(f"a configured key cannot be used with {algorithm}") from None


def _public_keys(pem_file: Path | None, jwks_file: Path | None) -> list[_PublicKey]:
    keys = [_pem_key(pem_file)] if pem_file is not None else []
    if jwks_file is not None:
        keys.extend(_jwks_keys(jwks_file))
    return keys


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AuthConfigError(f"cannot read {path}: {exc.strerror}") from None


def _pem_key(path: Path) -> _PublicKey:
    data = _read(path)
    try:
        if b"-----BEGIN CERTIFICATE-----" in data:
            public: PublicKeyTypes = x509.load_pem_x509_certificate(data).public_key()
        else:
            public = load_pem_public_key(data)
    except ValueError:
        raise AuthConfigError(
            f"{path} is not a PEM public key or certificate (never configure a private key)"
        ) from None
    pem = public.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    if isinstance(public, rsa.RSAPublicKey):
        return _PublicKey(kid=None, kty="RSA", crv=None, alg=None, data=pem)
    if isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name in _CURVE_NAMES:
        crv = _CURVE_NAMES[public.curve.name]
        return _PublicKey(kid=None, kty="EC", crv=crv, alg=None, data=pem)
    raise AuthConfigError(f"{path} must hold an RSA or EC (P-256/384/521) public key")


def _jwks_keys(path: Path) -> list[_PublicKey]:
    try:
        document = json.loads(_read(path))
    except ValueError:
        raise AuthConfigError(f"{path} is not valid JSON") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise AuthConfigError(f"{path} must be a JWKS: an object with a 'keys' list")
    return [key for entry in entries if (key := _jwk(entry, path)) is not None]


def _jwk(entry: object, path: Path) -> _PublicKey | None:
    """One JWKS entry as a public key; None for entries that are not signature keys we use."""
    if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
        return None
    kty = entry.get("kty")
    members = _JWK_MEMBERS.get(kty) if isinstance(kty, str) else None
    if members is None:
        return None  # oct, OKP, ...: the HMAC secret comes from RAG_JWT_SECRET only
    kid, alg = entry.get("kid"), entry.get("alg")
    values = [entry.get(member) for member in members]
    if not all(isinstance(v, str) for v in (*values, kid or "", alg or "")):
        raise AuthConfigError(f"{path}: a {kty} key has a missing or non-string member")
    data = {"kty": str(kty), **{m: str(v) for m, v in zip(members, values, strict=True)}}
    return _PublicKey(kid=kid, kty=str(kty), crv=data.get("crv"), alg=alg, data=data)
