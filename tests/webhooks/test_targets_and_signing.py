"""Where a webhook may go, and its signature against the Standard Webhooks reference."""

from __future__ import annotations

import base64
import re
import socket
import time
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr, ValidationError
from standardwebhooks.webhooks import Webhook

from app.settings import Settings
from app.webhooks import TargetRefused, check_target, deliver, resolve, signed_headers
from tests.webhooks.receiver import receiving

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()


def test_our_signature_is_the_reference_libraries() -> None:
    body = b'{"type":"job.succeeded","data":{"job_id":"x"}}'
    now = int(time.time())
    headers = signed_headers(SECRET, message_id="msg_1", timestamp=now, body=body)
    assert Webhook(SECRET).verify(body, headers) == {
        "type": "job.succeeded",
        "data": {"job_id": "x"},
    }
    reference = Webhook(SECRET).sign("msg_1", datetime.fromtimestamp(now, tz=UTC), body.decode())
    assert headers["webhook-signature"] == reference


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/x", "must be https"),
        ("ftp://hooks.example.com/x", "absolute http(s) URL"),
        ("https:///path-only", "absolute http(s) URL"),
        ("https://user:pw@hooks.example.com/x", "credentials"),
        ("https://hooks.example.com:99999/x", "not a valid URL"),
        ("https://" + "a" * 2100 + ".com/", "longer than"),
        ("https://hooks.example.com/a b", "control character or space (U+0020 at position 27)"),
        ("https://hooks.example.com/x\r\nHost: evil", "control character or space (U+000D"),
        ("https://hooks.example.com\x00.evil/x", "control character or space (U+0000"),
    ],
)
def test_a_url_of_the_wrong_form_is_refused(url: str, why: str) -> None:
    with pytest.raises(TargetRefused, match=re.escape(why)):
        check_target(url, allowed_hosts=())


def test_a_listed_host_may_use_http() -> None:
    target = check_target("http://[::1]:8080/x", allowed_hosts=["[::1]"])
    assert (target.host, target.port, target.listed) == ("::1", 8080, True)
    assert check_target("http://Hooks.Internal./x", allowed_hosts=["hooks.internal"]).listed
    assert check_target("https://hooks.example.com/x", allowed_hosts=()).port == 443


@pytest.mark.parametrize(
    "host",
    [
        "10.1.2.3",
        "172.16.0.1",
        "192.168.0.1",
        "127.0.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "[::1]",
        "[fe80::1]",
        "[fc00::1]",
        "[::ffff:192.168.0.1]",
        "[::7f00:1]",  # IPv4-compatible
        "[::a9fe:a9fe]",
        "[::ffff:0:7f00:1]",  # IPv4-translated
        "[64:ff9b::7f00:1]",  # NAT64, the well-known prefix
        "[64:ff9b::a00:1]",
        "[64:ff9b:1::7f00:1]",  # NAT64, the local-use prefix: /96 layout
        "[64:ff9b:1:7f00:0:100::]",  # ... /48 layout
        "[64:ff9b:1:8:808:8:808:808]",  # 8.8.8.8 in the /96 layout, 0.8.8.0 in the /48 one
        "[2002:7f00:1::]",  # 6to4
        "[2002:a9fe:a9fe::]",
        "[2001:0:808:808::80ff:fffe]",  # Teredo: server 8.8.8.8, client 127.0.0.1
        "[2001:0:808:808::5601:5601]",  # ... client 169.254.169.254
        "[2001:0:a00:1::fefe:fefe]",  # ... server 10.0.0.1
        "localhost",
    ],
)
async def test_private_loopback_and_link_local_addresses_are_refused(host: str) -> None:
    target = check_target(f"https://{host}/hook", allowed_hosts=())
    with pytest.raises(TargetRefused, match="resolves to"):
        await resolve(target)


@pytest.mark.parametrize("address", ["::7f00:1", "64:ff9b::a9fe:a9fe", "2002:a00:1::"])
async def test_a_name_resolving_to_ipv4_inside_ipv6_is_refused(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    """The resolved addresses are judged like written ones (the resolver answers as a DNS
    server of the attacker's would: an AAAA record carrying a private IPv4 address)."""

    async def resolver(host: str, port: int, **_: object) -> list[tuple[object, ...]]:
        assert host == "hooks.example.com"
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    monkeypatch.setattr("app.webhooks.targets.anyio.getaddrinfo", resolver)
    target = check_target("https://hooks.example.com/x", allowed_hosts=())
    with pytest.raises(TargetRefused, match="resolves to"):
        await resolve(target)


async def test_a_listed_host_may_be_private_and_public_addresses_pass() -> None:
    listed = check_target("http://127.0.0.1/x", allowed_hosts=["127.0.0.1"])
    assert await resolve(listed) == ["127.0.0.1"]
    assert await resolve(check_target("https://8.8.8.8/x", allowed_hosts=())) == ["8.8.8.8"]
    for public in ("64:ff9b::808:808", "2002:808:808::", "2001:0:808:808::fefe:fefe"):
        target = check_target(f"https://[{public}]/x", allowed_hosts=())
        assert await resolve(target) == [public]  # IPv4 inside, public: 8.8.8.8 or 1.1.1.1


async def test_a_delivery_connects_only_to_the_addresses_checked() -> None:
    """`localhost` listed: its loopback addresses are tried in turn (the receiver listens on
    127.0.0.1 only); not listed: refused before any connection."""
    with receiving(SECRET, [204]) as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        body = b"{}"
        headers = signed_headers(SECRET, message_id="m", timestamp=int(time.time()), body=body)
        listed = check_target(url, allowed_hosts=["localhost"])
        sent = await deliver(listed, body=body, headers=headers, timeout_seconds=10)
        assert (sent.status, sent.error) == (204, None)
        unlisted = check_target(url.replace("http://", "https://"), allowed_hosts=())
        refused = await deliver(unlisted, body=body, headers=headers, timeout_seconds=10)
        assert refused.status is None
        assert refused.error is not None
        assert "loopback" in refused.error
    assert len(receiver.received) == 1


def test_the_secret_must_be_a_standard_webhooks_one() -> None:
    assert Settings(_env_file=None, webhook_secret=SecretStr(SECRET)).webhook_secret
    for bad in (
        "plain-secret",
        "whsec_not base64!",
        "whsec_" + base64.b64encode(b"short").decode(),
    ):
        with pytest.raises(ValidationError, match="webhook_secret"):
            Settings(_env_file=None, webhook_secret=SecretStr(bad))


def test_allowed_hosts_are_read_comma_or_space_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1, hooks.internal [::1]")
    settings = Settings(_env_file=None)
    assert settings.webhook_allowed_hosts == ["127.0.0.1", "hooks.internal", "[::1]"]
