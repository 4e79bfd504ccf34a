"""Token verification: every way a token is refused, and the ways it is accepted."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jose import jwk, jwt
from pydantic import SecretStr

from app.auth import (
    SCOPE_ADMIN,
    SCOPE_INGEST,
    SCOPE_SEARCH,
    AuthConfigError,
    Principal,
    TokenVerifier,
    issue_token,
    principal_from_authorization,
)
from app.errors import Unauthenticated
from app.settings import Settings

SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
AUDIENCE, ISSUER = "rag-service", "https://issuer.test"


@dataclass(frozen=True)
class KeyPair:
    kid: str
    private_pem: str
    public_pem: bytes
    jwk: dict[str, str]


def _key_pair(kid: str, private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> KeyPair:
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public_pem = private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    algorithm = "RS256" if isinstance(private_key, rsa.RSAPrivateKey) else "ES256"
    public_jwk = {k: str(v) for k, v in jwk.construct(public_pem, algorithm).to_dict().items()}
    return KeyPair(kid, private_pem, public_pem, {**public_jwk, "kid": kid, "use": "sig"})


@pytest.fixture(scope="module")
def rsa_keys() -> list[KeyPair]:
    return [
        _key_pair(f"rsa-{i}", rsa.generate_private_key(public_exponent=65537, key_size=2048))
        for i in range(3)
    ]


@pytest.fixture(scope="module")
def ec_keys() -> list[KeyPair]:
    return [_key_pair(f"ec-{i}", ec.generate_private_key(ec.SECP256R1())) for i in range(3)]


def settings(**overrides: object) -> Settings:
    values: dict[str, object] = {"jwt_secret": SecretStr(SECRET), "jwt_algorithms": ["HS256"]}
    values.update(overrides)
    return Settings.model_validate(values)


def claims(**overrides: object) -> dict[str, object]:
    now = int(time.time())
    values: dict[str, object] = {
        "tenant_id": "acme",
        "sub": "user-1",
        "scope": "rag:search",
        "iat": now,
        "exp": now + 300,
    }
    values.update(overrides)
    return {name: value for name, value in values.items() if value is not None}


def hs256(payload: dict[str, object], secret: str = SECRET) -> str:
    return jwt.encode(payload, secret, algorithm="HS256")


def signed(payload: dict[str, object], pair: KeyPair, *, algorithm: str, kid: bool = True) -> str:
    headers = {"kid": pair.kid} if kid else None
    return jwt.encode(payload, pair.private_pem, algorithm=algorithm, headers=headers)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict[str, object], payload: object, key: bytes = b"") -> str:
    """A token built by hand: `alg: none`, or HMAC with an arbitrary key (algorithm confusion)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest() if key else b""
    return f"{signing_input}.{b64(signature)}"


@pytest.fixture
def jwks_file(tmp_path: Path, rsa_keys: list[KeyPair], ec_keys: list[KeyPair]) -> Path:
    """Two RSA and two EC keys (key rotation), plus entries the verifier must skip."""
    keys: list[dict[str, str]] = [pair.jwk for pair in (*rsa_keys[:2], *ec_keys[:2])]
    keys.append({"kty": "oct", "k": b64(b"not-an-hmac-key-source"), "kid": "oct"})
    keys.append({**rsa_keys[2].jwk, "use": "enc", "kid": "encryption-only"})
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": keys}))
    return path


@pytest.fixture
def hs_verifier() -> TokenVerifier:
    return TokenVerifier.from_settings(settings())


def assert_refused(verifier: TokenVerifier, token: str, reason: str, *secrets: str) -> None:
    """Refused with `reason`, an RFC 6750 challenge, and no token or key material anywhere."""
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(token)
    error = caught.value
    assert reason in error.detail
    challenge = error.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", error_description="')
    assert reason in challenge
    shown = " ".join([error.detail, str(error), *error.headers.values(), repr(error.extra)])
    fragments = [part for part in token.split(".") if len(part) >= 8]
    for fragment in [token, *fragments, SECRET, *secrets]:
        assert fragment not in shown


# -- refused ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    ["not-a-jwt", "a.b", "a.b.c.d", "....", "é.é.é", "eyJ.eyJ.sig", "W10.e30.AA", "e30.e30.A"],
)
def test_refuses_what_is_not_a_jwt(hs_verifier: TokenVerifier, token: str) -> None:
    assert_refused(hs_verifier, token, "malformed token")


def test_refuses_a_signed_payload_that_is_not_an_object(hs_verifier: TokenVerifier) -> None:
    token = handmade({"alg": "HS256"}, [1, 2], SECRET.encode())
    assert_refused(hs_verifier, token, "malformed token")


def test_refuses_an_expired_token(hs_verifier: TokenVerifier) -> None:
    now = int(time.time())
    assert_refused(hs_verifier, hs256(claims(iat=now - 600, exp=now - 60)), "token expired")


def test_accepts_a_token_expired_within_the_leeway(hs_verifier: TokenVerifier) -> None:
    now = int(time.time())
    assert hs_verifier.verify(hs256(claims(exp=now - 5))).tenant_id == "acme"


def test_refuses_a_token_not_yet_valid(hs_verifier: TokenVerifier) -> None:
    token = hs256(claims(nbf=int(time.time()) + 120))
    assert_refused(hs_verifier, token, "not yet valid")


def test_refuses_a_token_issued_in_the_future(hs_verifier: TokenVerifier) -> None:
    token = hs256(claims(iat=int(time.time()) + 120))
    assert_refused(hs_verifier, token, "issued in the future")


@pytest.mark.parametrize("name", ["exp", "nbf", "iat"])
def test_refuses_a_time_claim_that_is_not_a_number(hs_verifier: TokenVerifier, name: str) -> None:
    assert_refused(hs_verifier, hs256(claims(**{name: "tomorrow"})), f"invalid claim '{name}'")


def test_refuses_a_token_signed_with_another_secret(hs_verifier: TokenVerifier) -> None:
    token = hs256(claims(), secret="another-secret-of-sufficient-length-0123456789")
    assert_refused(hs_verifier, token, "bad signature")


@pytest.mark.parametrize("alg", ["none", "None", "NONE", ""])
def test_refuses_an_unsigned_token(hs_verifier: TokenVerifier, alg: str) -> None:
    assert_refused(hs_verifier, handmade({"alg": alg, "typ": "JWT"}, claims()), "unsupported alg")


def test_refuses_a_token_without_alg(hs_verifier: TokenVerifier) -> None:
    assert_refused(hs_verifier, handmade({"typ": "JWT"}, claims()), "unsupported algorithm")


def test_refuses_an_algorithm_not_configured(hs_verifier: TokenVerifier) -> None:
    token = jwt.encode(claims(), SECRET, algorithm="HS512")
    assert_refused(hs_verifier, token, "unsupported algorithm")


def test_refuses_a_critical_header_it_does_not_understand(hs_verifier: TokenVerifier) -> None:
    token = handmade({"alg": "HS256", "crit": ["b64"], "b64": False}, claims(), SECRET.encode())
    assert_refused(hs_verifier, token, "unsupported critical header")


def test_refuses_hs256_signed_with_the_rsa_public_key_when_only_rs256_is_configured(
    tmp_path: Path, rsa_keys: list[KeyPair]
) -> None:
    pem = tmp_path / "public.pem"
    pem.write_bytes(rsa_keys[0].public_pem)
    verifier = TokenVerifier.from_settings(
        settings(jwt_secret=None, jwt_algorithms=["RS256"], jwt_public_key_file=pem)
    )
    forged = handmade({"alg": "HS256", "typ": "JWT"}, claims(), rsa_keys[0].public_pem)
    assert_refused(verifier, forged, "unsupported algorithm", rsa_keys[0].public_pem.decode())


def test_refuses_hs256_signed_with_the_rsa_public_key_when_hs256_is_configured_too(
    tmp_path: Path, rsa_keys: list[KeyPair]
) -> None:
    pem = tmp_path / "public.pem"
    pem.write_bytes(rsa_keys[0].public_pem)
    verifier = TokenVerifier.from_settings(
        settings(jwt_algorithms=["HS256", "RS256"], jwt_public_key_file=pem)
    )
    forged = handmade({"alg": "HS256", "kid": rsa_keys[0].kid}, claims(), rsa_keys[0].public_pem)
    assert_refused(verifier, forged, "bad signature", rsa_keys[0].public_pem.decode())
    assert verifier.verify(hs256(claims())).tenant_id == "acme"
    assert verifier.verify(signed(claims(), rsa_keys[0], algorithm="RS256")).tenant_id == "acme"


def test_refuses_a_token_signed_by_an_unknown_rsa_key(
    jwks_file: Path, rsa_keys: list[KeyPair]
) -> None:
    verifier = TokenVerifier.from_settings(
        settings(jwt_algorithms=["RS256"], jwt_jwks_file=jwks_file)
    )
    outsider = rsa_keys[2]
    impostor = KeyPair(rsa_keys[0].kid, outsider.private_pem, outsider.public_pem, outsider.jwk)
    assert_refused(verifier, signed(claims(), impostor, algorithm="RS256"), "bad signature")
    assert_refused(verifier, signed(claims(), outsider, algorithm="RS256"), "unknown key id")
    unnamed = signed(claims(), rsa_keys[0], algorithm="RS256", kid=False)
    assert_refused(verifier, unnamed, "no key id")


def test_refuses_a_token_whose_header_names_another_algorithm_than_its_key(
    jwks_file: Path, rsa_keys: list[KeyPair], ec_keys: list[KeyPair]
) -> None:
    verifier = TokenVerifier.from_settings(
        settings(jwt_algorithms=["RS256", "ES256"], jwt_jwks_file=jwks_file)
    )
    _, payload, signature = signed(claims(), rsa_keys[0], algorithm="RS256").split(".")
    relabelled = b64(json.dumps({"alg": "ES256", "kid": ec_keys[0].kid}).encode())
    assert_refused(verifier, f"{relabelled}.{payload}.{signature}", "bad signature")


def test_refuses_the_wrong_audience_or_issuer() -> None:
    verifier = TokenVerifier.from_settings(settings(jwt_audience=AUDIENCE, jwt_issuer=ISSUER))
    good = {"aud": AUDIENCE, "iss": ISSUER}
    assert verifier.verify(hs256(claims(**good))).subject == "user-1"
    assert verifier.verify(hs256(claims(**{**good, "aud": ["other", AUDIENCE]}))).subject
    assert_refused(verifier, hs256(claims(**{**good, "aud": "other"})), "wrong audience")
    assert_refused(verifier, hs256(claims(**{**good, "aud": None})), "missing claim 'aud'")
    assert_refused(verifier, hs256(claims(**{**good, "aud": 7})), "invalid claim 'aud'")
    assert_refused(verifier, hs256(claims(**{**good, "iss": "https://evil"})), "wrong issuer")
    assert_refused(verifier, hs256(claims(**{**good, "iss": None})), "missing claim 'iss'")


@pytest.mark.parametrize("name", ["tenant_id", "sub", "exp"])
def test_refuses_a_token_missing_a_required_claim(hs_verifier: TokenVerifier, name: str) -> None:
    assert_refused(hs_verifier, hs256(claims(**{name: None})), f"missing claim '{name}'")


@pytest.mark.parametrize("value", ["", "  ", 42, ["acme"]])
def test_refuses_a_tenant_that_is_not_a_string(hs_verifier: TokenVerifier, value: object) -> None:
    assert_refused(hs_verifier, hs256(claims(tenant_id=value)), "invalid claim 'tenant_id'")


@pytest.mark.parametrize("value", ["a\x00b", "a\ud800", "x" * 65, "../etc", "acme\n", "ac me"])
def test_refuses_a_tenant_that_is_not_a_tenant_id(hs_verifier: TokenVerifier, value: str) -> None:
    token = handmade({"alg": "HS256"}, claims(tenant_id=value), SECRET.encode())
    assert_refused(hs_verifier, token, "invalid claim 'tenant_id'")


def _standard_b64(token: str) -> str:
    """The same token with base64url's `-`/`_` written as standard base64's `+`/`/`."""
    return token.replace("-", "+").replace("_", "/")


def test_refuses_standard_base64_and_padding(hs_verifier: TokenVerifier) -> None:
    for n in range(200):  # a validly signed token whose segments hold `-` or `_`
        token = hs256(claims(scope=f"rag:search {'~' * n}", nonce="\u00ff" * n))
        if "-" in token or "_" in token:
            break
    assert hs_verifier.verify(token).tenant_id == "acme"
    assert_refused(hs_verifier, _standard_b64(token), "malformed token")
    header, payload, signature = token.split(".")
    padded = f"{header}{'=' * (-len(header) % 4)}.{payload}.{signature}"
    if padded != token:
        assert_refused(hs_verifier, padded, "malformed token")
    assert_refused(hs_verifier, token + "\n", "malformed token")


def test_refuses_non_canonical_trailing_bits(hs_verifier: TokenVerifier) -> None:
    """Base64url's last character may carry unused bits; a token with them set decodes to the
    same bytes, so one token would be many strings. Only the canonical form is accepted."""
    token = hs256(claims())
    header, payload, signature = token.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(signature[-1])
    twin = alphabet[last ^ 1]  # 256-bit signature: 43 characters, the last holds 2 unused bits
    assert base64.urlsafe_b64decode(signature[:-1] + twin + "=") == base64.urlsafe_b64decode(
        signature + "="
    )
    assert_refused(hs_verifier, f"{header}.{payload}.{signature[:-1]}{twin}", "malformed token")


def test_tenant_claim_name_comes_from_the_settings() -> None:
    verifier = TokenVerifier.from_settings(settings(jwt_tenant_claim="org"))
    assert verifier.verify(hs256(claims(tenant_id=None, org="globex"))).tenant_id == "globex"
    assert_refused(verifier, hs256(claims()), "missing claim 'org'")


def test_refuses_an_oversize_token_before_decoding_it(hs_verifier: TokenVerifier) -> None:
    validly_signed = hs256(claims(padding="x" * 9000))
    assert_refused(hs_verifier, validly_signed, "token too large")
    assert_refused(hs_verifier, "!" * 8193, "token too large")


# -- accepted -----------------------------------------------------------------------------------


def test_accepts_an_hs256_token(hs_verifier: TokenVerifier) -> None:
    principal = hs_verifier.verify(hs256(claims(scope="rag:search rag:ingest")))
    assert principal == Principal("acme", "user-1", frozenset({SCOPE_SEARCH, SCOPE_INGEST}))
    assert principal.has_scope(SCOPE_SEARCH)
    assert not principal.has_scope(SCOPE_ADMIN)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_accepts_every_key_of_a_rotating_jwks(
    jwks_file: Path, rsa_keys: list[KeyPair], ec_keys: list[KeyPair], algorithm: str
) -> None:
    verifier = TokenVerifier.from_settings(
        settings(jwt_secret=None, jwt_algorithms=[algorithm], jwt_jwks_file=jwks_file)
    )
    pairs = rsa_keys if algorithm == "RS256" else ec_keys
    for pair in pairs[:2]:
        principal = verifier.verify(signed(claims(sub=pair.kid), pair, algorithm=algorithm))
        assert principal.subject == pair.kid
    assert_refused(verifier, signed(claims(), pairs[2], algorithm=algorithm), "unknown key id")
    assert_refused(verifier, hs256(claims()), "unsupported algorithm")


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_accepts_a_token_without_kid_when_one_key_is_configured(
    tmp_path: Path, rsa_keys: list[KeyPair], ec_keys: list[KeyPair], algorithm: str
) -> None:
    pair = rsa_keys[0] if algorithm == "RS256" else ec_keys[0]
    pem = tmp_path / "public.pem"
    pem.write_bytes(pair.public_pem)
    verifier = TokenVerifier.from_settings(
        settings(jwt_secret=None, jwt_algorithms=[algorithm], jwt_public_key_file=pem)
    )
    assert verifier.verify(signed(claims(), pair, algorithm=algorithm, kid=False)).tenant_id
    assert verifier.verify(signed(claims(), pair, algorithm=algorithm)).tenant_id


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"scope": "rag:search  rag:ingest "}, {SCOPE_SEARCH, SCOPE_INGEST}),
        ({"scope": None, "scp": ["rag:search", "rag:admin"]}, {SCOPE_SEARCH, SCOPE_ADMIN}),
        ({"scope": None, "scp": "rag:ingest"}, {SCOPE_INGEST}),
        ({"scope": None, "scopes": ["rag:ingest"]}, {SCOPE_INGEST}),
        ({"scope": "rag:search", "scopes": ["rag:admin"]}, {SCOPE_SEARCH, SCOPE_ADMIN}),
        ({"scope": None}, set()),
    ],
)
def test_reads_scopes_from_scope_scp_or_scopes(
    hs_verifier: TokenVerifier, extra: dict[str, object], expected: set[str]
) -> None:
    assert hs_verifier.verify(hs256(claims(**extra))).scopes == expected


@pytest.mark.parametrize("extra", [{"scope": 5}, {"scp": [1, 2]}, {"scopes": {"a": 1}}])
def test_refuses_scopes_of_the_wrong_type(
    hs_verifier: TokenVerifier, extra: dict[str, object]
) -> None:
    [name] = extra
    assert_refused(hs_verifier, hs256(claims(**extra)), f"invalid claim '{name}'")


# -- the Authorization header -------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "", "   ", "Bearer", "Bearer   ", "Basic dXNlcjpwdw=="])
def test_a_missing_bearer_token_gets_a_bare_challenge(
    hs_verifier: TokenVerifier, header: str | None
) -> None:
    with pytest.raises(Unauthenticated) as caught:
        principal_from_authorization(header, hs_verifier)
    assert caught.value.headers == {"WWW-Authenticate": "Bearer"}


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_a_bearer_header_yields_the_principal(hs_verifier: TokenVerifier, scheme: str) -> None:
    principal = principal_from_authorization(f"{scheme} {hs256(claims())}", hs_verifier)
    assert principal.tenant_id == "acme"


def test_a_bad_token_in_the_header_is_an_invalid_token(hs_verifier: TokenVerifier) -> None:
    with pytest.raises(Unauthenticated) as caught:
        principal_from_authorization("Bearer abc.def.ghi", hs_verifier)
    assert 'error="invalid_token"' in caught.value.headers["WWW-Authenticate"]


# -- issuing and configuration ------------------------------------------------------------------


def test_issued_tokens_verify_with_the_same_settings() -> None:
    config = settings(jwt_audience=AUDIENCE, jwt_issuer=ISSUER, jwt_tenant_claim="org")
    token = issue_token(
        config, tenant_id="acme", subject="cli", scopes=["rag:search rag:ingest"], ttl_seconds=60
    )
    principal = TokenVerifier.from_settings(config).verify(token)
    assert principal == Principal("acme", "cli", frozenset({SCOPE_SEARCH, SCOPE_INGEST}))
    assert jwt.get_unverified_header(token)["alg"] == "HS256"


def test_issuing_without_a_secret_is_a_clear_error() -> None:
    with pytest.raises(AuthConfigError, match="RAG_JWT_SECRET"):
        issue_token(settings(jwt_secret=None), tenant_id="a", subject="s", scopes=[], ttl_seconds=1)


def test_issuing_when_no_hs_algorithm_is_allowed_is_a_clear_error() -> None:
    with pytest.raises(AuthConfigError, match="RAG_JWT_ALGORITHMS"):
        issue_token(
            settings(jwt_algorithms=["RS256"]), tenant_id="a", subject="s", scopes=[], ttl_seconds=1
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"jwt_secret": None}, "RAG_JWT_SECRET"),
        ({"jwt_algorithms": ["RS256"]}, "no RSA public key"),
        ({"jwt_algorithms": ["ES256"]}, "no EC P-256 public key"),
    ],
)
def test_a_configuration_that_cannot_verify_fails_at_start(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(AuthConfigError, match=message):
        TokenVerifier.from_settings(settings(**overrides))


@pytest.mark.parametrize(
    ("name", "content", "field", "message"),
    [
        ("missing.pem", None, "jwt_public_key_file", "cannot read"),
        ("private.pem", "private", "jwt_public_key_file", "not a PEM public key"),
        ("garbage.pem", "hello", "jwt_public_key_file", "not a PEM public key"),
        ("jwks.json", "{", "jwt_jwks_file", "not valid JSON"),
        ("jwks.json", '{"keys": 1}', "jwt_jwks_file", "must be a JWKS"),
        ("jwks.json", '{"keys": [{"kty": "RSA", "n": 1}]}', "jwt_jwks_file", "non-string"),
    ],
)
def test_key_files_that_cannot_be_used_fail_at_start(
    tmp_path: Path,
    rsa_keys: list[KeyPair],
    name: str,
    content: str | None,
    field: str,
    message: str,
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(rsa_keys[0].private_pem if content == "private" else content)
    with pytest.raises(AuthConfigError, match=message) as caught:
        TokenVerifier.from_settings(settings(jwt_algorithms=["RS256"], **{field: path}))
    assert "PRIVATE KEY" not in str(caught.value)
