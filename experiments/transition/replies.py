"""Every model reply, stored content-addressed by the hash of the request that produced it, and a
loopback proxy that records them (in front of a model server) or replays them (no model).

Why: a model run takes most of an hour on two cores; its results must still be reproducible by
anyone, byte for byte. The proxy sits between the experiment's OpenAI-compatible client and the
model server, so the client path is the same in both modes:

- live: a request is forwarded to the model server once; the same request again in the same run
  (same prompt, same parameters, temperature 0) is answered from the reply already recorded;
- replay: a request is answered from a stored reply set; a request with no stored reply is an
  error (502) and counted, and the experiment refuses to write results (the protocol changed
  since the replies were recorded).

The proxy builds its response from the stored fields only (content, finish reason, usage), so the
client receives the same bytes in both modes. `replies.jsonl` holds one entry per line, sorted by
request hash: the request path and body, its SHA-256, the reply content and its SHA-256, usage.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopproof.engine.system.errors import BadInput

FILE = "replies.jsonl"


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_hash(path: str, body: Any) -> str:
    return hashlib.sha256(canonical({"path": path, "body": body})).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry(path: str, body: Any, content: str, finish_reason: str, usage: Mapping[str, Any]
          ) -> dict[str, Any]:
    return {"request_sha256": request_hash(path, body), "path": path, "request": body,
            "content": content, "reply_sha256": text_hash(content),
            "finish_reason": finish_reason, "usage": dict(usage)}


def dumps(entries: Mapping[str, dict[str, Any]]) -> str:
    """The reply set as JSON lines sorted by request hash (the same set gives the same bytes)."""
    return "".join(canonical(entries[k]).decode() + "\n" for k in sorted(entries))


def load(path: Path) -> dict[str, dict[str, Any]]:
    """A stored reply set, every entry's hashes checked; BadInput naming the line otherwise."""
    if not path.is_file():
        raise BadInput(str(path), "replies", "no stored reply set here",
                       "point --replay at a results folder written by a model run")
    out: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path}:{i}"
        try:
            e = json.loads(line)
            key, content = e["request_sha256"], e["content"]
            ok = (isinstance(content, str) and key == request_hash(e["path"], e["request"])
                  and e["reply_sha256"] == text_hash(content))
        except (ValueError, KeyError, TypeError):
            raise BadInput(where, "entry", "not a reply entry",
                           "restore the file from the model run that wrote it") from None
        if not ok:
            raise BadInput(where, "request_sha256/reply_sha256", "hash does not match the entry",
                           "the reply set was edited; restore it from the model run") from None
        out[key] = e
    return out


def response(e: Mapping[str, Any]) -> dict[str, Any]:
    """The API response the proxy sends for a stored entry (the same in live and replay mode)."""
    if e["path"] == "/v1/completions":
        choice: dict[str, Any] = {"index": 0, "text": e["content"]}
        kind = "text_completion"
    else:
        choice = {"index": 0, "message": {"role": "assistant", "content": e["content"]}}
        kind = "chat.completion"
    choice["finish_reason"] = e["finish_reason"]
    return {"id": "r-" + e["request_sha256"][:24], "object": kind,
            "model": e["request"].get("model") if isinstance(e["request"], dict) else None,
            "choices": [choice], "usage": e["usage"]}


class Proxy:
    """Record (upstream given) or replay (upstream None) the model's replies. Thread-safe."""

    def __init__(self, upstream: str | None, stored: Mapping[str, dict[str, Any]] | None = None,
                 timeout_s: float = 3600.0, journal: Path | None = None,
                 on_call: Callable[[Proxy], None] | None = None) -> None:
        """`journal` (live mode): every new reply is appended there as it arrives, and replies
        already in it (from an interrupted run of the same experiment) are used, not asked
        again, so an interrupted hour is not lost. The caller deletes it after a complete run."""
        self.upstream = upstream.rstrip("/") if upstream else None
        self.stored = dict(stored or {})
        self.used: dict[str, dict[str, Any]] = {}
        self.journal = journal
        self.on_call = on_call  # told after every model call (progress)
        self.resumed = 0
        if journal is not None and journal.is_file():
            try:
                self.used = load(journal)
            except BadInput:  # a torn last line: keep what verifies
                self.used = {}
                for line in journal.read_text(encoding="utf-8").splitlines():
                    try:
                        e = json.loads(line)
                        if e["request_sha256"] == request_hash(e["path"], e["request"]):
                            self.used[e["request_sha256"]] = e
                    except (ValueError, KeyError, TypeError):
                        continue
            self.resumed = len(self.used)
        self.requests = self.misses = self.model_calls = 0
        self.called_completion_tokens = 0  # of this run's model calls only (rates exclude resumed)
        self.model_seconds = 0.0
        self.failure: str | None = None
        self.timeout_s = timeout_s
        self.lock = threading.Lock()

    def answer(self, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        key = request_hash(path, body)
        with self.lock:  # one request at a time: the model is serial anyway
            self.requests += 1
            if key in self.used:
                return 200, response(self.used[key])
            if self.upstream is None:
                if key not in self.stored:
                    self.misses += 1
                    return 502, {"error": {"message": f"no stored reply for request {key[:16]}"}}
                self.used[key] = self.stored[key]
                return 200, response(self.used[key])
            return self._forward(key, path, body)

    def _forward(self, key: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        assert self.upstream is not None
        url = self.upstream + path.removeprefix("/v1")
        req = urllib.request.Request(url, canonical(body), {"Content-Type": "application/json"})
        t = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                data = json.loads(resp.read().decode("utf-8"))
            choice = data["choices"][0]
            content = choice["message"]["content"] if path != "/v1/completions" \
                else choice["text"]
            if not isinstance(content, str):
                raise TypeError("content is not text")
            e = entry(path, body, content, str(choice.get("finish_reason")),
                      data.get("usage") or {})
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError,
                TypeError) as exc:
            # the model server failed: not a reply of the model, so not stored; the run is void
            self.failure = self.failure or f"{type(exc).__name__}: {exc}"
            return 502, {"error": {"message": f"model server failed: {exc}"}}
        finally:
            self.model_seconds += time.monotonic() - t
        self.model_calls += 1
        self.called_completion_tokens += int(e["usage"].get("completion_tokens") or 0)
        self.used[key] = e
        if self.journal is not None:
            try:
                self.journal.parent.mkdir(parents=True, exist_ok=True)
                with open(self.journal, "a", encoding="utf-8") as f:
                    f.write(canonical(e).decode() + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:  # e.g. a full disk: the run could not be resumed, so stop it
                self.failure = self.failure or f"journal {self.journal}: {exc.strerror or exc}"
        if self.on_call is not None:
            self.on_call(self)
        return 200, response(e)

    def differences(self, prior: Mapping[str, dict[str, Any]]) -> dict[str, int]:
        """How this run's replies compare with an earlier run's, request by request."""
        common = [k for k in self.used if k in prior]
        return {"compared": len(common),
                "differed": sum(self.used[k]["reply_sha256"] != prior[k]["reply_sha256"]
                                for k in common),
                "new": len(self.used) - len(common)}

    def tokens(self) -> dict[str, int]:
        def total(field: str) -> int:
            return sum(int(e["usage"].get(field) or 0) for e in self.used.values())

        return {"prompt": total("prompt_tokens"), "completion": total("completion_tokens"),
                "total": total("total_tokens")}


@contextmanager
def running(proxy: Proxy) -> Iterator[str]:
    """Serve `proxy` on an ephemeral loopback port; yield its base URL (ending in /v1)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            except (ValueError, UnicodeDecodeError):
                status, obj = 400, {"error": {"message": "the body is not JSON"}}
            else:
                status, obj = proxy.answer(self.path, body)
            data = canonical(obj)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
