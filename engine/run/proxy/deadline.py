"""A wall-clock limit on one exchange with the upstream: at the deadline its socket is shut.

Why not the connection's timeout alone: that bounds each read, so an upstream that sends a byte
now and then (a ping, a body a byte at a time) holds the exchange, and the handler thread that
waits on it, forever; `Proxy.stop()` then waits on that thread too. Every exchange the proxy
opens (a metered call, a free one, a /tokenize count) runs under one, and its socket is tracked
while it is open, so stopping the proxy shuts it as well.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Callable
from typing import Any


def shut(s: socket.socket) -> None:
    """Hang up both ways: a read blocked on `s` in another thread ends at once."""
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)


class Deadline:
    """`with Deadline(seconds, track) as d: d.connect(conn); ...`: past `seconds` from the
    start, `d.expired` is set and the connection's socket is shut (the read in progress ends
    with an error or an early end of the answer)."""

    def __init__(self, seconds: float, track: Callable[[socket.socket, bool], None]) -> None:
        self.seconds, self.track = seconds, track
        self.expired = False
        # kept: http.client drops conn.sock once an answer says "Connection: close" (the
        # answer reads on from it)
        self.sock: socket.socket | None = None
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()
        if self.sock is not None:
            self.track(self.sock, False)

    def connect(self, conn: http.client.HTTPConnection) -> None:
        conn.connect()
        self.sock = conn.sock
        self.track(self.sock, True)
        if self.expired:  # the deadline fell during connect
            shut(self.sock)

    def expire(self) -> None:
        self.expired = True
        if self.sock is not None:
            shut(self.sock)
