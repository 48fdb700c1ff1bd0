"""The SSRF guard of the page-visit tool: which URLs may be fetched, and at which address.

A URL is checked after DNS resolution, and the caller then connects to the checked address itself
(not to the name again), so a name that resolves to a public address once and to a private one the
next time (DNS rebinding) cannot slip through. An IPv6 address that carries an IPv4 address (mapped,
6to4, Teredo, NAT64, IPv4-compatible, ISATAP) must pass the IPv4 rules for what it carries as well.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import httpx

from backend.tools.base import ToolError

ALLOWED_SCHEMES = ("http", "https")
NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
ISATAP_INTERFACE_IDS = (0x00005EFE, 0x02005EFE)  # bits 32-63 from the right of an ISATAP address


class BlockedAddressError(ToolError):
    """The URL's host resolves to an address that is not public (and private hosts are not allowed)."""

    def __init__(self, host: str, address: str) -> None:
        self.host, self.address = host, address
        super().__init__(
            f"refusing to visit {host!r}: it resolves to a private, loopback, link-local, multicast or "
            f"reserved address ({address}); only public web pages can be visited."
        )


@dataclass(frozen=True)
class ResolvedURL:
    url: httpx.URL  # as given (the Host header and TLS name come from it)
    addresses: tuple[str, ...]  # the checked IP addresses to connect to, in resolver order


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, by every standard way of carrying one."""
    found = [v4 for v4 in (ip.ipv4_mapped, ip.sixtofour) if v4 is not None]
    if ip.teredo is not None:
        found.extend(ip.teredo)  # (server, client)
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if any(ip in prefix for prefix in NAT64_PREFIXES) or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        found.append(low32)
    if (int(ip) >> 32) & 0xFFFFFFFF in ISATAP_INTERFACE_IDS:
        found.append(low32)
    return found


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        carried = embedded_ipv4(ip)
        if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 host itself
            return _is_public(ip.ipv4_mapped)
        return _is_public(ip) and all(_is_public(v4) for v4 in carried)
    return _is_public(ip)


def resolve_checked(url: str | httpx.URL, *, allow_private: bool) -> ResolvedURL:
    """Parse, resolve and vet `url`; raises ToolError with a sentence when it may not be fetched."""
    try:
        parsed = httpx.URL(str(url))
    except (httpx.InvalidURL, TypeError) as problem:
        raise ToolError(f"{url!r} is not a valid URL ({problem}); give a full http:// or https:// address.") from problem
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise ToolError(
            f"only http:// and https:// pages can be visited, not {parsed.scheme or 'scheme-less'!s} URLs like {str(url)[:80]!r}."
        )
    if not parsed.host:
        raise ToolError(f"{str(url)[:80]!r} has no host name; give a full address such as https://example.org/page.")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parsed.host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as problem:
        raise ToolError(f"the host {parsed.host!r} cannot be resolved ({problem}); check the address or the network.") from problem
    addresses = list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))
    if not allow_private:
        blocked = [address for address in addresses if not is_public_address(address)]
        if blocked:
            raise BlockedAddressError(parsed.host, blocked[0])
    return ResolvedURL(url=parsed, addresses=tuple(addresses))


def request_to_address(client: httpx.Client, method: str, target: ResolvedURL, address: str, *,
                       headers: dict[str, str] | None = None, json: object = None) -> httpx.Request:
    """A request for `target` that goes to the checked `address` (not to the name again); the Host
    header and the TLS server name still come from the URL, so virtual hosts and certificates work."""
    return client.build_request(
        method,
        target.url.copy_with(host=address, userinfo=b""),
        headers={"Host": target.url.netloc.decode("ascii"), **(headers or {})},
        extensions={"sni_hostname": target.url.raw_host.decode("ascii")},
        json=json,
    )
