"""Whether a base URL's host is on the user's own machine or network (pricing.py's local note).

A literal loopback, private or link-local address is local; so is `localhost`, and a name under a
suffix only a home or company network answers (`.local`, `.lan`, `.internal`, `.home.arpa`,
`.localhost`: `host.docker.internal`, `ollama.lan`), without a lookup. Any other name (`gpu-box`)
is resolved, once per process (cached: pricing asks every turn), with a short timeout (a lookup
that hangs must not hold a turn's pricing), and is local when every address it has is: a name that
does not resolve, or resolves to one public address, is not. Tests pass their own `resolve`.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["LOCAL_SUFFIXES", "RESOLVE_TIMEOUT_S", "Resolver", "default_resolver", "host_of", "hosts_file_resolver",
           "local_host", "resolve_host"]

LOCAL_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localhost")
RESOLVE_TIMEOUT_S = 1.0

Resolver = Callable[[str], list[str]]  # a host name -> its addresses ([] when it has none)
_NETS = [ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",  # private, link-local
    "fc00::/7", "fe80::/10")]  # IPv6 unique local, link-local
_cache: dict[str, list[str]] = {}
_cache_lock = threading.Lock()


def host_of(base_url: str | None) -> str | None:
    """The host of `base_url` (with or without a scheme), lower case; None when it has none."""
    if not base_url:
        return None
    try:
        host = urlsplit(base_url if "//" in base_url else "//" + base_url).hostname
    except ValueError:
        return None
    host = (host or "").rstrip(".").lower()
    return host or None


def _local_address(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])  # (an IPv6 scope: fe80::1%eth0)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or any(address in net for net in _NETS if net.version == address.version)


def resolve_host(host: str) -> list[str]:
    """`host`'s addresses, asked of the system's resolver (/etc/hosts, DNS) at most once per process
    and never longer than RESOLVE_TIMEOUT_S ([] then, and for a name that does not resolve)."""
    with _cache_lock:
        if host in _cache:
            return _cache[host]
    found: list[str] = []

    def ask() -> None:
        try:
            found.extend(sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)}))
        except (OSError, UnicodeError):
            pass

    # getaddrinfo takes no timeout: asked in a thread that is left behind if it hangs.
    asking = threading.Thread(target=ask, name=f"resolve {host}", daemon=True)
    asking.start()
    asking.join(RESOLVE_TIMEOUT_S)
    addresses = list(found) if not asking.is_alive() else []
    with _cache_lock:
        _cache[host] = addresses
    return addresses


def hosts_file_resolver(host: str, path: str = "/etc/hosts") -> list[str]:
    """`host`'s addresses as the hosts file alone gives them (no DNS): the resolver the test suite
    uses (tests/conftest.py), so no test asks the network."""
    found: list[str] = []
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) > 1 and host in (name.lower().rstrip(".") for name in fields[1:]):
            found.append(fields[0])
    return sorted(set(found))


default_resolver: Resolver = resolve_host  # (the suite's conftest swaps in hosts_file_resolver)


def local_host(base_url: str | None, resolve: Resolver | None = None) -> tuple[bool, str | None]:
    """Whether `base_url`'s host is local, and, for a name it took a lookup to tell, what it
    resolved to ("gpu-box is 192.168.1.20": doctor and the run's start say why it counts as local)."""
    host = host_of(base_url)
    if host is None:
        return False, None
    if host == "localhost" or host.endswith(LOCAL_SUFFIXES):
        return True, None
    if _local_address(host.strip("[]")):
        return True, None
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return False, None  # a public address
    except ValueError:
        pass
    addresses = (resolve or default_resolver)(host)
    if addresses and all(_local_address(a) for a in addresses):
        return True, f"{host} is {', '.join(addresses)}"
    return False, None
