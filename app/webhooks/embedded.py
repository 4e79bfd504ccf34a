"""The IPv4 addresses an IPv6 address carries, so that the IPv4 rules apply to them: a packet
to any of these forms may reach the IPv4 address inside (through the host's own stack, a NAT64
gateway, a 6to4 or a Teredo relay).

- IPv4-mapped `::ffff:a.b.c.d` and IPv4-translated `::ffff:0:a.b.c.d` (RFC 2765);
- IPv4-compatible `::a.b.c.d` (RFC 4291, deprecated but still routed by some stacks);
- NAT64, the well-known prefix `64:ff9b::/96` (RFC 6052): the last 32 bits;
- NAT64, the local-use prefix `64:ff9b:1::/48` (RFC 8215): its operator picks the prefix
  length (/48, /56, /64 or /96, each placing the IPv4 address elsewhere), so every layout's
  address is returned;
- 6to4 `2002::/16` (RFC 3056): bits 16 to 47;
- Teredo `2001::/32` (RFC 4380): the server (bits 32 to 63) and the client (the last 32 bits,
  inverted)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, IPv6Network

_MAPPED = IPv6Network("::ffff:0:0/96")
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = IPv6Network("::/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")
_LOCAL_LAYOUTS = (48, 56, 64, 96)  # the RFC 6052 prefix lengths that fit inside the /48


def embedded_ipv4(address: IPv6Address) -> list[IPv4Address]:
    """The IPv4 addresses inside `address`; empty when it is no such form."""
    if any(address in net for net in (_MAPPED, _TRANSLATED, _COMPATIBLE, _NAT64)):
        return [IPv4Address(address.packed[12:])]
    if address in _NAT64_LOCAL:
        return [_rfc6052(address, prefix) for prefix in _LOCAL_LAYOUTS]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def _rfc6052(address: IPv6Address, prefix: int) -> IPv4Address:
    """The IPv4 address placed after a NAT64 prefix of `prefix` bits: right after it, skipping
    bits 64 to 71 (RFC 6052, section 2.2)."""
    packed = address.packed
    if prefix == 96:
        return IPv4Address(packed[12:])
    return IPv4Address((packed[:8] + packed[9:])[prefix // 8 :][:4])
