"""`middle serve`: run the app with uvicorn on 127.0.0.1 (another address only with a token)."""

from __future__ import annotations

import os
import socket
from typing import Mapping

import click

from orchestrator.errors import ConfigError
from orchestrator.server.auth import is_loopback

DEFAULT_PORT = 8765
MIN_TOKEN_CHARS = 16
TOKEN_HINT = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


def named_tokens(names: dict[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """`[server] tokens` (name -> environment variable) read from the environment: name -> token.
    A variable that is not set is an error naming it (a person named in the config could
    otherwise not sign in, silently)."""
    tokens = {}
    for name, variable in names.items():
        value = environ.get(variable)
        if not value:
            raise ConfigError(f"[server] tokens names {name!r} with the environment variable "
                              f"{variable}, which is not set: export it (e.g. from {TOKEN_HINT}) or "
                              "remove the name from middle.toml")
        tokens[name] = value
    return tokens


def check_bind(host: str, token: str | None, named: dict[str, str] | None = None) -> None:
    """Refuse a reachable address without a token, and a token too short to be a secret."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"MIDDLE_API_TOKEN is {len(token)} characters long: use at least "
                          f"{MIN_TOKEN_CHARS}, e.g. the output of {TOKEN_HINT}")
    for name, secret in (named or {}).items():
        if len(secret) < MIN_TOKEN_CHARS:
            raise ConfigError(f"the token of {name!r} ([server] tokens) is {len(secret)} characters "
                              f"long: use at least {MIN_TOKEN_CHARS}, e.g. the output of {TOKEN_HINT}")
    if not is_loopback(host) and not token and not named:
        raise ConfigError(f"--host {host} can be reached from other machines, so it needs a token: "
                          f"export MIDDLE_API_TOKEN (e.g. from {TOKEN_HINT}), or serve on 127.0.0.1")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, so `--port 0` works and a busy port is one clear error."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(
            f"cannot resolve --host {host} ({exc.strerror}): pass an IP address such as 127.0.0.1"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): choose another --port, or stop the program that uses it"
        ) from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs MIDDLE_API_TOKEN.",
)
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free port)."
)
@click.option("--fake", is_flag=True, help="Run tickets on the built-in offline fake model.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, fake: bool) -> None:
    """Serve the memory API, the tickets API, live run events and the dashboard."""
    import uvicorn

    from orchestrator.cli.context import get_config, services
    from orchestrator.cli.output import console, safe
    from orchestrator.lifecycle.next_steps import started_as
    from orchestrator.server.app import create_app

    started_as(fake=fake)  # the hints its runs leave (`middle resume ID`) keep --fake
    config = get_config(ctx)
    token = os.environ.get("MIDDLE_API_TOKEN") or None
    named = named_tokens(config.server.tokens, os.environ)
    check_bind(host, token, named)
    svc = services(ctx, config, fake=fake)
    app = create_app(config, services=svc, fake=fake, token=token, tokens=named)
    sock = bind(host, port)
    url = url_of(sock)
    console.print(
        f"middle serve: dashboard {safe(url)}  API docs {safe(url)}docs"
        + ("  (token required)" if token or named else "")
        + ("  [offline fake model]" if fake else "")
    )
    console.print("press Ctrl-C to stop")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=3))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled, after a clean shutdown
        pass
    console.print("middle serve: stopped")
