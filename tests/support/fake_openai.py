"""A small fake OpenAI-compatible server on 127.0.0.1 for tests: it answers POST
/v1/chat/completions (and /v1/completions, GET /v1/models) with scripted replies, in order, and
records every request it saw (and when, relative to other events, through a shared `events`
list). Never touches the network.

A reply is a string (the message content, non-streamed, usage {"total_tokens": 500}), or
("status", code) for an HTTP error, or ("raw", bytes) for a body that is not the API's shape, or
a `Reply`: a scripted upstream that streams when asked, is slow, lies about usage, errors, or
returns more tokens than it was asked for.

Why it stops as it does: a server left running past its test writes into the next test's
output (a handler that wakes from a scripted delay after its client has gone raised BrokenPipe,
and socketserver printed the traceback into whatever test was running then). So leaving the block
wakes every scripted delay, shuts every open connection, and joins every handler thread; a client
gone mid-reply is expected and silent; any other error in a handler fails the test that owns the
server, at the end of its block.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. Tokens are words: one completion token per word, one stream chunk
    per token. `usage`: "true" (what it sent), "missing", "low" (claims 1 completion token),
    "high" (claims 10x), "string" (not numbers), or a dict sent as is."""

    content: str = "ok"
    usage: Any = "true"
    delay_s: float = 0.0        # before the answer starts
    chunk_delay_s: float = 0.0  # between stream chunks
    status: int = 200
    extra_tokens: int = 0       # tokens past max_tokens (an upstream that ignores it)
    break_stream: bool = False  # close the stream half-way, without usage or [DONE]
    # the other API shapes (tests/support/fake_apis.py): prompt tokens read from / written to the
    # cache, reasoning tokens (billed as output), a tool call, a mid-stream error event
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    tool: dict[str, Any] | None = None
    fail_stream: bool = False


class FakeServer:
    def __init__(self, replies: list[Any], events: list[str] | None = None) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.events = events if events is not None else []
        self.httpd: ThreadingHTTPServer | None = None
        self.arrived = threading.Event()  # set when a request arrives
        self.lock = threading.Lock()
        self.default: Any = "{}"  # the reply once the script is used up
        self.on_request: Any = None  # called with the request's body before it is answered
        self.closing = threading.Event()  # set when the block ends: scripted delays end early
        self.live: set[socket.socket] = set()  # open connections, shut when the block ends
        self.errors: list[str] = []  # handler errors other than a client gone mid-reply
        # None: no /tokenize (a 404, like OpenAI's API). "exact": vLLM's /tokenize, whose count
        # is the usage.prompt_tokens this server then reports (`template_tokens`). "text": a
        # /tokenize that counts the messages' text without the chat template (a planted fault:
        # below the usage)
        self.tokenize: str | None = None
        self.counted: list[dict[str, Any]] = []  # the /tokenize requests seen
        # path -> handler(request handler, body, raw) for the other API shapes
        # (tests/support/fake_apis.py); every request they see is in `requests` too
        self.routes: dict[str, Any] = {}
        # body -> the prompt tokens an honest upstream reports for a chat or completions call
        # (tests/support/fake_apis.py's worst case); None: a quarter of the body's bytes
        self.count_prompt: Any = None

    @property
    def base_url(self) -> str:
        assert self.httpd is not None
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def next_reply(self) -> Any:
        with self.lock:
            return self.replies.pop(0) if self.replies else self.default

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.live.add(self.connection)

            def finish(self) -> None:
                with server.lock:
                    server.live.discard(self.connection)
                with contextlib.suppress(OSError):  # the client may be gone already
                    super().finish()

            def pause(self, seconds: float) -> bool:
                """Sleep a scripted delay; False if the server is closing meanwhile."""
                return not server.closing.wait(seconds) if seconds > 0 else True

            def send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                server.requests.append({"path": self.path, "body": None, "raw": b"",
                                        "auth": self.headers.get("Authorization"),
                                        "headers": {k.lower(): v for k, v in
                                                    self.headers.items()}})
                if self.path != "/v1/models":
                    return self.send(404, b"{}")
                return self.send(200, json.dumps({"object": "list", "data": [
                    {"id": "fake-model", "object": "model", "created": 0,
                     "owned_by": "tests"}]}).encode())

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                if self.path == "/tokenize":  # kept apart: `requests` are the calls that cost
                    server.counted.append({"body": body,
                                           "auth": self.headers.get("Authorization")})
                    if server.tokenize is None:
                        return self.send(404, b'{"detail": "Not Found"}')
                    n = template_tokens(body, with_template=server.tokenize == "exact")
                    return self.send(200, json.dumps({"count": n, "max_model_len": 32768,
                                                      "tokens": list(range(n))}).encode())
                server.requests.append({"path": self.path, "body": body, "bytes": len(raw),
                                        "auth": self.headers.get("Authorization"), "raw": raw,
                                        "headers": {k.lower(): v for k, v in
                                                    self.headers.items()}})
                server.events.append("request")
                if server.on_request is not None:
                    server.on_request(body)
                server.arrived.set()
                route = server.routes.get(self.path.split("?")[0])
                if route is not None:
                    return route(self, body, raw)
                reply = server.next_reply()
                if isinstance(reply, Reply):
                    return self.scripted(reply, body, len(raw))
                if self.path != "/v1/chat/completions":
                    return self.send(404, b"")
                if isinstance(reply, tuple) and reply[0] == "status":
                    return self.send(int(reply[1]), b"")
                if isinstance(reply, tuple) and reply[0] == "raw":
                    data = reply[1]
                else:
                    data = json.dumps({"choices": [{"message": {"role": "assistant",
                                                                "content": reply}}],
                                       "usage": {"total_tokens": 500}}).encode()
                return self.send(200, data)

            def scripted(self, r: Reply, body: dict[str, Any], n_bytes: int) -> None:
                if not self.pause(r.delay_s):
                    return None
                if r.status != 200:
                    return self.send(r.status, json.dumps({"error": {
                        "message": "scripted failure", "type": "server_error", "param": None,
                        "code": None}}).encode())
                chat = self.path == "/v1/chat/completions"
                limit = body.get("max_completion_tokens") or body.get("max_tokens") or 10**6
                words = r.content.split(" ")
                words = words[:limit] + ["more"] * r.extra_tokens
                prompt = (template_tokens(body) if server.tokenize is not None
                          else server.count_prompt(body) if server.count_prompt is not None
                          else max(1, n_bytes // 4))
                usage = _usage(r.usage, max(prompt, r.cache_read), len(words))
                if r.cache_read and r.usage == "true":
                    usage["prompt_tokens_details"] = {"cached_tokens": r.cache_read}
                if body.get("stream"):
                    return self.stream(r, chat, words, usage,
                                       bool((body.get("stream_options") or {})
                                            .get("include_usage")))
                text = " ".join(words)
                choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                           "finish_reason": "stop"} if chat else
                          {"index": 0, "text": text, "finish_reason": "stop"})
                doc: dict[str, Any] = {"id": "fake-1", "object": "chat.completion" if chat
                                       else "text_completion", "created": 0,
                                       "model": body.get("model"), "choices": [choice]}
                if usage is not None:
                    doc["usage"] = usage
                return self.send(200, json.dumps(doc).encode())

            def stream(self, r: Reply, chat: bool, words: list[str], usage: Any,
                       include_usage: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                kind = "chat.completion.chunk" if chat else "text_completion"

                def chunk(choices: list[dict[str, Any]], **more: Any) -> None:
                    doc = {"id": "fake-1", "object": kind, "created": 0, "model": "fake-model",
                           "choices": choices, **more}
                    self.wfile.write(b"data: " + json.dumps(doc).encode() + b"\n\n")
                    self.wfile.flush()

                try:
                    for i, w in enumerate(words):
                        if r.break_stream and i == len(words) // 2:
                            return
                        piece = w if i == 0 else " " + w
                        chunk([{"index": 0, "delta": {"content": piece}, "finish_reason": None}
                               if chat else {"index": 0, "text": piece, "finish_reason": None}])
                        if not self.pause(r.chunk_delay_s):
                            return
                    chunk([{"index": 0, "delta": {}, "finish_reason": "stop"} if chat else
                           {"index": 0, "text": "", "finish_reason": "stop"}])
                    if include_usage and usage is not None:
                        chunk([], usage=usage)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except OSError:  # the client (the proxy) cut the stream
                    return

        return Handler


def template_tokens(body: dict[str, Any], *, with_template: bool = True) -> int:
    """The fake's tokenizer: a word is a token, and its chat template adds 4 tokens a message,
    3 for the generation prompt and a token per 4 bytes of the tools' JSON."""
    if "messages" in body:
        msgs = body.get("messages") or []
        words = sum(len(str(m.get("content") or "").split()) for m in msgs)
        if not with_template:
            return max(1, words)
        tools = len(json.dumps(body["tools"])) // 4 if body.get("tools") else 0
        return words + 4 * len(msgs) + 3 + tools
    return max(1, len(str(body.get("prompt") or "").split()) + (1 if with_template else 0))


def _usage(kind: Any, prompt: int, completion: int) -> Any:
    if isinstance(kind, dict):
        return kind
    return {"true": {"prompt_tokens": prompt, "completion_tokens": completion,
                     "total_tokens": prompt + completion},
            "missing": None,
            "low": {"prompt_tokens": prompt, "completion_tokens": 1,
                    "total_tokens": prompt + 1},
            "high": {"prompt_tokens": prompt * 10, "completion_tokens": completion * 10,
                     "total_tokens": (prompt + completion) * 10},
            "string": {"prompt_tokens": "12", "completion_tokens": "3"}}[kind]


class QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-reply (a worker killed by its test, a proxy timing out under
    load) is not the server's error; any other handler error is kept for the owner's block end
    instead of printed from a request thread into whichever test captures stderr then."""

    daemon_threads = False  # server_close joins every handler thread
    block_on_close = True
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Silent for a client gone mid-reply (expected: the proxy cuts calls); any other
        error is kept for the block's end instead of printed into some test's output."""
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipe, reset, aborted
            return
        with self.fake.lock:
            self.fake.errors.append(traceback.format_exc())


@contextmanager
def fake_openai(replies: list[Any], events: list[str] | None = None) -> Iterator[FakeServer]:
    """Run a FakeServer on an ephemeral port of 127.0.0.1 for the duration of the block; on
    leaving it, every handler has ended (see the module docstring)."""
    server = FakeServer(replies, events)
    httpd = QuietServer(("127.0.0.1", 0), server.handler())
    httpd.fake = server
    server.httpd = httpd
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              name="fake-openai", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        httpd.shutdown()
        with server.lock:
            for conn in list(server.live):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()  # joins every handler thread
        thread.join(5)
    if server.errors:
        raise AssertionError("the fake upstream's handlers failed:\n" + "\n".join(server.errors))
