"""The SSRF guard of the page-visit tool: which URLs may be fetched, and at which address.

A URL is checked after DNS resolution, and the caller then connects to the checked address itself
(not to the name again), so a name that resolves to a public address once and to a private one the
next time (DNS rebinding) cannot slip through.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import httpx

from backend.tools.base import ToolError

ALLOWED_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class ResolvedURL:
    url: httpx.URL  # as given (the Host header and TLS name come from it)
    addresses: tuple[str, ...]  # the checked IP addresses to connect to, in resolver order


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


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
            raise ToolError(
                f"refusing to visit {parsed.host!r}: it resolves to a private, loopback, link-local, multicast or "
                f"reserved address ({blocked[0]}); only public web pages can be visited."
            )
    return ResolvedURL(url=parsed, addresses=tuple(addresses))
