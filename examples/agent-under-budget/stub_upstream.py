"""A stand-in OpenAI-compatible model server for the example (standard library only).

It answers /v1/chat/completions (streamed or not) with a short "next step" and a true `usage`,
and /v1/models; it checks the key if STUB_KEY is set. Point the example (or anything else) at
any real OpenAI-compatible server instead by editing `upstream` in graph.toml.

    python stub_upstream.py [--port 18089]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STEPS = ["read the failing test", "find the off-by-one", "patch the loop bound",
         "run the tests again", "tidy the docstring"]


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler that answers JSON (examples/mini-swe-agent's stub uses it too)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def send(self, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: list[tuple[str, Any]], *, close: bool = False) -> None:
        """Server-sent events (`event: NAME` and `data: JSON` each), as the Anthropic Messages
        and OpenAI Responses streams are sent; `close`: the connection drops after the last one
        written, with no end of stream (a stream that broke off: the connection is reset)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        if close:  # a reset, not an orderly end: the client cannot take it for one
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()


def serve(port: int = 0, key: str | None = None) -> ThreadingHTTPServer:
    """Start the stub on 127.0.0.1:`port` (0: any free port) in a thread; return the server."""
    counter = iter(range(10**9))

    class Handler(JsonHandler):
        def allowed(self) -> bool:
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self.send(401, {"error": {"message": "bad key", "type": "invalid_request_error",
                                          "param": None, "code": "invalid_api_key"}})
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802
            if self.allowed():
                self.send(200, {"object": "list", "data": [
                    {"id": "stub", "object": "model", "created": 0, "owned_by": "example"}]})

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if not self.allowed():
                return
            body = json.loads(raw or b"{}")
            text = STEPS[next(counter) % len(STEPS)]
            words = text.split()[: int(body.get("max_tokens") or 1000)]
            usage = {"prompt_tokens": len(raw) // 4, "completion_tokens": len(words),
                     "total_tokens": len(raw) // 4 + len(words)}
            if not body.get("stream"):
                return self.send(200, {"id": "stub", "object": "chat.completion", "created": 0,
                                       "model": body.get("model"), "usage": usage,
                                       "choices": [{"index": 0, "finish_reason": "stop",
                                                    "message": {"role": "assistant",
                                                                "content": " ".join(words)}}]})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for i, w in enumerate(words):
                chunk = {"id": "stub", "object": "chat.completion.chunk", "created": 0,
                         "model": body.get("model"), "choices": [
                             {"index": 0, "delta": {"content": w if i == 0 else " " + w},
                              "finish_reason": None}]}
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            if (body.get("stream_options") or {}).get("include_usage"):
                last = {"id": "stub", "object": "chat.completion.chunk", "created": 0,
                        "model": body.get("model"), "choices": [], "usage": usage}
                self.wfile.write(b"data: " + json.dumps(last).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128  # many clients at once (the default 5 drops their SYNs)

    server = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18089)
    port = ap.parse_args().port
    server = serve(port, os.environ.get("STUB_KEY"))
    print(f"stub upstream on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
