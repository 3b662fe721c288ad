"""Whether anything answers at a coding agent's model API address, asked once before its first
turn: Gemini CLI and OpenCode retry a server that is not there until the turn's timeout (15 min by
default) and aider and Codex fail each ticket in turn, so a base URL with nothing behind it (a
local model server not started, a typo in its port) is said once, before any ticket is claimed
(Services.ready_coding_agent asks when a run is about to claim one, so a command that starts no
turn, `middle run` with nothing to run, asks nothing).

Only a base URL the user gave is asked (an agent's `model_base_url`: its options, its environment
variables, its own config file): an agent's own default service is not, and no model call is
made, a TCP connection only. Names resolve through local_host's resolver (short timeout, cached;
the test suite's reads the hosts file alone)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from orchestrator.coding_agent import local_host

__all__ = ["CONNECT_TIMEOUT_S", "model_base_url", "unreachable"]

CONNECT_TIMEOUT_S = 3.0  # a server on the same network answers a TCP connect in milliseconds


def model_base_url(cls: Any, options: Any, environ: Mapping[str, str]) -> str | None:
    """The base URL a coding agent class's turns will call with these options, when the user set
    one (the class's optional `model_base_url(options, environ)` classmethod); None otherwise."""
    ask = getattr(cls, "model_base_url", None)
    return ask(options, environ) if ask is not None else None


def unreachable(base_url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing answers at `base_url` ("connection refused", "its host name does not resolve",
    "no answer within 3 s"), or None when a TCP connection to it opens."""
    try:
        parts = urlsplit(base_url if "//" in base_url else "//" + base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "it is not a URL"
    host = local_host.host_of(base_url)
    if host is None:
        return "it names no host"
    try:
        addresses = [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        addresses = local_host.default_resolver(host)
    if not addresses:
        return f"its host name {host} does not resolve"
    why = ""
    for address in addresses:
        try:
            with socket.create_connection((address, port), timeout=timeout_s):
                return None
        except ConnectionRefusedError:
            why = f"connection refused at {host} port {port}"
        except TimeoutError:
            why = why or f"no answer from {host} port {port} within {timeout_s:g} s"
        except OSError as exc:
            why = why or f"{host} port {port} cannot be reached ({exc.strerror or exc})"
    return why
