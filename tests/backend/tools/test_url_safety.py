import ipaddress

import pytest

from backend.tools.base import ToolError
from backend.tools.url_safety import embedded_ipv4, is_public_address, resolve_checked


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
        "::1", "::", "fe80::1", "fc00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
    ],
)  # fmt: skip
def test_non_public_addresses_are_refused(address):
    assert not is_public_address(address)


@pytest.mark.parametrize("address, carried", [
    ("2002:7f00:1::", "127.0.0.1"),  # 6to4
    ("2002:a00:1::1", "10.0.0.1"),
    ("2002:a9fe:a9fe::", "169.254.169.254"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"),  # Teredo (client address obfuscated)
    ("64:ff9b::7f00:1", "127.0.0.1"),  # NAT64
    ("64:ff9b:1::a00:1", "10.0.0.1"),
    ("::7f00:1", "127.0.0.1"),  # IPv4-compatible
    ("2606:4700::5efe:a00:1", "10.0.0.1"),  # ISATAP interface id under a public prefix
])
def test_ipv6_forms_that_carry_a_private_ipv4_address_are_refused(address, carried):
    assert ipaddress.IPv4Address(carried) in embedded_ipv4(ipaddress.IPv6Address(address))
    assert not is_public_address(address)
    with pytest.raises(ToolError, match=f"refusing to visit .*{address.split(':')[0]}"):
        resolve_checked(f"http://[{address}]/", allow_private=False)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111",
                                     "2002:808:808::1"])  # 6to4 of 8.8.8.8
def test_public_addresses_pass(address):
    assert is_public_address(address)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "gopher://x", "javascript:alert(1)", "example.org"])
def test_only_http_and_https_are_allowed(url):
    with pytest.raises(ToolError, match="only http:// and https://"):
        resolve_checked(url, allow_private=True)


def test_names_are_checked_after_resolution():
    with pytest.raises(ToolError, match=r"refusing to visit 'localhost'.*127\.0\.0\.1|refusing to visit 'localhost'.*::1"):
        resolve_checked("http://localhost:8000/admin", allow_private=False)
    with pytest.raises(ToolError, match="refusing to visit"):
        resolve_checked("http://[::ffff:7f00:1]/", allow_private=False)
    with pytest.raises(ToolError, match="refusing to visit"):
        resolve_checked("http://2130706433/", allow_private=False)  # 127.0.0.1 written as one number
    allowed = resolve_checked("http://localhost:8000/admin", allow_private=True)
    assert set(allowed.addresses) <= {"127.0.0.1", "::1"} and allowed.url.host == "localhost"


def test_an_unresolvable_host_is_a_clear_error():
    with pytest.raises(ToolError, match="cannot be resolved"):
        resolve_checked("http://no-such-host.invalid/", allow_private=False)
