"""Relay a loopback TCP port to the attempt's proxy socket, then run the worker.

Why: the worker runs without a network (its own network namespace), so the proxy is reachable
only through a Unix socket bound into the sandbox; most agent CLIs and SDKs take an http URL
(OPENAI_BASE_URL, ANTHROPIC_BASE_URL), not a socket. This program runs inside the sandbox as
the worker's parent: it listens on 127.0.0.1 (the namespace's own loopback), sets
OPENAI_BASE_URL (and OPENAI_API_BASE) to it with `/v1`, ANTHROPIC_BASE_URL without (Anthropic's
clients append `/v1/messages` themselves), runs the worker's argv and exits with its exit code. It holds no secret (the worker has the same token)
and imports only the standard library, run as `python -I -S bridge.py` so nothing in the
worker's folder or environment can shadow a module.

    python -I -S bridge.py --socket /path/to/proxy.sock -- argv...
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def serve(path: str) -> socketserver.ThreadingTCPServer:
    """A loopback listener whose every connection is spliced to the Unix socket `path`."""

    class Relay(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(path)
            except OSError:
                return
            back = threading.Thread(target=_pipe, args=(up, self.request), daemon=True)
            back.start()
            _pipe(self.request, up)
            back.join()
            up.close()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 256

        def handle_error(self, request: object, client_address: object) -> None:
            pass

    server = Server(("127.0.0.1", 0), Relay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--socket" or argv[2] != "--":
        print("usage: bridge.py --socket PATH -- argv...", file=sys.stderr)
        return 2
    server = serve(argv[1])
    root = f"http://127.0.0.1:{server.server_address[1]}"
    env = dict(os.environ, OPENAI_BASE_URL=root + "/v1", OPENAI_API_BASE=root + "/v1",
               ANTHROPIC_BASE_URL=root)
    try:
        child = subprocess.Popen(argv[3:], env=env)
    except OSError as exc:
        print(f"bridge: cannot start {argv[3]!r}: {exc}", file=sys.stderr)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
