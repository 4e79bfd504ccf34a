"""Where a webhook may go. https only, and never to a private, loopback, link-local or other
non-public address, unless its host is listed (RAG_WEBHOOK_ALLOWED_HOSTS): a listed host may
use http and any address. An IPv6 address that carries an IPv4 one (mapped, compatible,
NAT64, 6to4, Teredo) is judged by the IPv4 address inside. The name is resolved and its
addresses checked at submission and again before each delivery, which then connects to the
address checked (a name that resolves elsewhere later cannot send it inside). A URL holding a
control character (NUL, CR, LF, DEL...) or a space anywhere can never be sent as it is: it is
refused, never cleaned up; such a URL, or one of another form that cannot be sent, is
`Unsendable` (a delivery gives it up at once, where a refused address may be allowed later)."""

from __future__ import annotations

import ipaddress
import socket
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio

from app.webhooks.embedded import embedded_ipv4

MAX_URL_CHARS = 2048
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(ValueError):
    """The URL may not be called; the message says why."""


class Unsendable(TargetRefused):
    """The URL itself can never be sent, whatever the settings or the addresses its host
    resolves to later: its form (length, characters, scheme, host, credentials)."""


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    host: str  # lower case, IPv6 without brackets
    port: int
    listed: bool


def check_target(url: str, *, allowed_hosts: Collection[str]) -> Target:
    """The URL's form: an absolute http(s) URL with a host and no credentials, https unless
    its host is listed. Its addresses are checked by `resolve`."""
    if len(url) > MAX_URL_CHARS:
        raise Unsendable(f"longer than {MAX_URL_CHARS} characters")
    if (position := _unsendable(url)) is not None:
        raise Unsendable(
            f"holds a control character or space (U+{ord(url[position]):04X} at position "
            f"{position}): percent-encode it"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise Unsendable(f"not a valid URL: {error}") from None
    host = (parts.hostname or "").rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        raise Unsendable("must be an absolute http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise Unsendable("must not carry credentials: the signature authenticates the call")
    listed = host in {_host(entry) for entry in allowed_hosts}
    if parts.scheme != "https" and not listed:
        raise TargetRefused(
            f"must be https (or its host, {host}, listed in RAG_WEBHOOK_ALLOWED_HOSTS)"
        )
    default = 443 if parts.scheme == "https" else 80
    return Target(url=url, host=host, port=port or default, listed=listed)


async def resolve(target: Target) -> list[str]:
    """The host's addresses, to connect to in this order, once every one has been checked."""
    try:
        found = await anyio.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError) as error:  # ValueError: not a host name at all
        raise TargetRefused(f"{target.host} does not resolve: {error}") from None
    addresses = [ipaddress.ip_address(str(sockaddr[0]).split("%")[0]) for *_, sockaddr in found]
    if not addresses:
        raise TargetRefused(f"{target.host} does not resolve")
    if not target.listed:
        for address in addresses:
            if not _public(address):
                raise TargetRefused(
                    f"{target.host} resolves to {address}, a private, loopback, link-local "
                    "or reserved address (list the host in RAG_WEBHOOK_ALLOWED_HOSTS to allow it)"
                )
    return list(dict.fromkeys(str(address) for address in addresses))


_UNSENDABLE = frozenset({"Cc", "Cs", "Zs", "Zl", "Zp"})  # controls, lone surrogates, spaces


def _unsendable(url: str) -> int | None:
    """Where the URL holds a character no request line may carry (urlsplit would drop a CR,
    LF or tab silently and keep a NUL), if anywhere."""
    for position, char in enumerate(url):
        if char.isspace() or unicodedata.category(char) in _UNSENDABLE:
            return position
    return None


def _public(address: _Address) -> bool:
    """A global unicast address; an IPv6 address carrying IPv4 ones (app/webhooks/embedded.py)
    is judged by the IPv4 ones alone, every one of them public."""
    if isinstance(address, ipaddress.IPv6Address) and (inside := embedded_ipv4(address)):
        return all(_public(ipv4) for ipv4 in inside)
    return address.is_global and not address.is_multicast


def _host(entry: str) -> str:
    return entry.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
