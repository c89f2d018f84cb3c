"""Running the web view: a socket on 127.0.0.1, a fresh token, the URL on stdout, uvicorn."""

from __future__ import annotations

import secrets
import socket
import sys
import webbrowser
from typing import Any

HOST = "127.0.0.1"  # never another interface: the page shows (and edits) everything in the store


def serve(service: Any, port: int, open_browser: bool) -> None:
    """Serve the view until interrupted. The socket is bound and listening before the URL is
    printed, so whoever reads the URL (a person, `--open`, a test) can connect at once."""
    import uvicorn

    from .app import make_app

    token = secrets.token_urlsafe(24)
    sock = listening_socket(port)
    url = f"http://{HOST}:{sock.getsockname()[1]}/?token={token}"
    sys.stdout.write(url + "\n")
    sys.stdout.flush()
    sys.stderr.write("mem: serving the store's web view on 127.0.0.1 (Ctrl-C stops it)\n")
    if open_browser:
        webbrowser.open(url)
    config = uvicorn.Config(make_app(service, token), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def listening_socket(port: int) -> socket.socket:
    """A TCP socket listening on 127.0.0.1:`port` (0: a free port the system picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        from ..errors import CliError

        raise CliError(f"cannot listen on {HOST}:{port}: {exc.strerror}", 1) from None
    sock.listen(64)
    return sock
