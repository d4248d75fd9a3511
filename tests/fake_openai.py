"""A small fake OpenAI-compatible server on 127.0.0.1 for tests: it answers POST
/v1/chat/completions with scripted replies, in order, and records every request it saw (and when,
relative to other events, through a shared `events` list). Never touches the network."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeServer:
    def __init__(self, replies: list[Any], events: list[str] | None = None) -> None:
        # each reply: a string (the message content), or ("status", code) for an HTTP error,
        # or ("raw", bytes) for a body that is not the API's shape
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.events = events if events is not None else []
        self.httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.httpd is not None
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, "body": body,
                                        "auth": self.headers.get("Authorization")})
                server.events.append("request")
                reply = server.replies.pop(0) if server.replies else "{}"
                if self.path != "/v1/chat/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                if isinstance(reply, tuple) and reply[0] == "status":
                    self.send_response(int(reply[1]))
                    self.end_headers()
                    return
                if isinstance(reply, tuple) and reply[0] == "raw":
                    data = reply[1]
                else:
                    data = json.dumps({"choices": [{"message": {"role": "assistant",
                                                                "content": reply}}],
                                       "usage": {"total_tokens": 500}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextmanager
def fake_openai(replies: list[Any], events: list[str] | None = None) -> Iterator[FakeServer]:
    """Run a FakeServer on an ephemeral port of 127.0.0.1 for the duration of the block."""
    server = FakeServer(replies, events)
    server.httpd = ThreadingHTTPServer(("127.0.0.1", 0), server.handler())
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(5)
