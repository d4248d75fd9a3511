"""The way a remote worker's model calls reach the engine's proxy: two byte relays.

Why two: the proxy (engine/run/proxy/) listens on a Unix socket in the engine's temp folder, and
the worker's sandbox has no network; locally the socket is bound into the sandbox and
`bridge.py` relays a loopback port inside it to the socket. On a Dask worker the same bridge runs
inside the same kind of sandbox, bound to a socket on *that* host (`UnixToTcp`), which relays each
connection over TCP to a port the engine opens for the attempt (`TcpToUnix`), which relays it to
the proxy's socket. Only the relays cross the network; the sandbox still has no route out, the
upstream key never leaves the engine, and every call still needs the attempt's token (the proxy
checks it) and is metered by the attempt's meter. Both relays end with the attempt.

`bridge.py` keeps its own copy of the splice: it runs as a standalone standard-library script
(`python -I -S`) inside the sandbox and imports nothing of the engine.
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import threading
from collections.abc import Callable
from pathlib import Path


def _splice(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _handler(connect: Callable[[], socket.socket]) -> type[socketserver.BaseRequestHandler]:
    class Relay(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                up = connect()
            except OSError:
                return
            back = threading.Thread(target=_splice, args=(up, self.request), daemon=True)
            back.start()
            _splice(self.request, up)
            back.join()
            up.close()

    return Relay


class _Quiet:
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client gone mid-call: the proxy's record says what happened


class _Tcp(_Quiet, socketserver.ThreadingTCPServer):
    allow_reuse_address = True


class _Unix(_Quiet, socketserver.ThreadingUnixStreamServer):
    pass


class Relay:
    """A running relay: `stop()` closes it (connections in flight are cut)."""

    def __init__(self, server: socketserver.BaseServer) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True,
                                       name="loopproof-relay")
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TcpToUnix(Relay):
    """The engine's end: a TCP port on `host` whose every connection is spliced to the Unix
    socket `path` (the attempt's proxy)."""

    def __init__(self, host: str, path: Path) -> None:
        def connect() -> socket.socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(path))
            return s

        super().__init__(_Tcp((host, 0), _handler(connect)))

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]  # type: ignore[misc]  # typeshed types the address as a union with bytes (AF_UNIX); ours is TCP
        return str(host), int(port)


class UnixToTcp(Relay):
    """The worker host's end: a Unix socket at `path` (bound into the worker's sandbox) whose
    every connection is spliced to the engine's port `address`."""

    def __init__(self, path: Path, address: tuple[str, int]) -> None:
        def connect() -> socket.socket:
            return socket.create_connection(address, timeout=30)

        self.path = Path(path)
        self.path.unlink(missing_ok=True)
        super().__init__(_Unix(str(path), _handler(connect)))
        os.chmod(path, 0o600)


def reaching(address: str) -> str:
    """The local address this host uses to reach `address` (tcp://HOST:PORT): where the engine
    listens for its workers' model calls, so that the scheduler's network reaches it."""
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((host, int(port or 8786)))
            return str(s.getsockname()[0])
        except (OSError, ValueError):
            return "127.0.0.1"
