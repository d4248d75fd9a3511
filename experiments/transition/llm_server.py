"""A local model behind an OpenAI-compatible endpoint on loopback, and the code that starts and
stops it.

Why a server rather than a library call: the experiment then reaches the model through exactly
the client a user with their own vLLM or llama.cpp server uses (`--coder openai`: metered, a
reservation before every call, replies parsed fail-closed). Nothing model-specific enters the
loop's code.

    python -m experiments.transition.llm_server --model-file F.gguf [--threads 2] [--port 0]

serves `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models` and `GET /health` on
127.0.0.1 and prints one JSON line `{"port": N}` once the model is loaded. The runtime is gpt4all
(prebuilt wheels with llama.cpp inside, no compiler needed), on the CPU, `OMP_WAIT_POLICY=PASSIVE`
so idle threads do not spin on a shared machine. Temperature 0 is greedy decoding (top_k = 1,
no repeat penalty), so the request's `seed` cannot change the reply. One request at a time.

`--backend echo` replaces the model by a reply of `{"action": "keep"}`: the tests use it to
check the start, health check and stop without weights.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from loopproof.engine.system.errors import BadInput

RUNTIME = "gpt4all"
RUNTIME_VERSION = "2.8.2"
N_CTX = 4096
START_TIMEOUT_S = 600.0  # loading 0.5 GB on a loaded two-core machine


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" | "length"


class Backend(Protocol):
    name: str
    info: dict[str, Any]

    def chat(self, messages: list[dict[str, str]], max_tokens: int, temperature: float
             ) -> Completion: ...

    def complete(self, prompt: str, max_tokens: int, temperature: float) -> Completion: ...


def chatml_system(messages: list[dict[str, str]]) -> str:
    """Every message but the last in Qwen's ChatML; the last (the user's) goes into the template."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages[:-1])


CHATML_USER = "<|im_start|>user\n{0}<|im_end|>\n<|im_start|>assistant\n{1}"


class Gpt4AllBackend:
    """llama.cpp through gpt4all, greedy at temperature 0."""

    def __init__(self, model_file: Path, threads: int) -> None:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from gpt4all import GPT4All  # the optional [llm] extra

        self.model = GPT4All(model_file.name, model_path=model_file.parent, allow_download=False,
                             n_threads=threads, device="cpu", n_ctx=N_CTX, verbose=False)
        self.name = model_file.name
        self.info = {"runtime": RUNTIME, "runtime_version": _version(), "threads": threads,
                     "n_ctx": N_CTX, "device": self.model.backend,
                     "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                     "sampling": "greedy at temperature 0 (top_k 1, repeat_penalty 1.0)"}

    def _run(self, prompt: str, max_tokens: int, temperature: float) -> tuple[str, int]:
        count = [0]

        def counted(_token: int, _text: str) -> bool:
            count[0] += 1
            return True

        greedy = temperature <= 0
        text = self.model.generate(prompt, max_tokens=max_tokens, temp=max(temperature, 0.0),
                                   top_k=1 if greedy else 40, top_p=1.0 if greedy else 0.95,
                                   repeat_penalty=1.0, n_batch=512, callback=counted)
        return text, count[0]

    def _usage(self, text: str, generated: int, max_tokens: int) -> Completion:
        ctx = getattr(self.model.model, "context", None)
        total = int(getattr(ctx, "n_past", 0) or 0)
        prompt = max(total - generated, 0)
        return Completion(text, prompt, generated, "length" if generated >= max_tokens else "stop")

    def chat(self, messages: list[dict[str, str]], max_tokens: int, temperature: float
             ) -> Completion:
        with self.model.chat_session(system_prompt=chatml_system(messages),
                                     prompt_template=CHATML_USER):
            text, n = self._run(messages[-1]["content"], max_tokens, temperature)
        return self._usage(text, n, max_tokens)

    def complete(self, prompt: str, max_tokens: int, temperature: float) -> Completion:
        text, n = self._run(prompt, max_tokens, temperature)
        return self._usage(text, n, max_tokens)


class EchoBackend:
    """No model: every reply is `{"action": "keep"}` (for tests of the server's life cycle)."""

    name = "echo"
    info = {"runtime": "echo", "runtime_version": "0", "threads": 1, "n_ctx": 0}

    def chat(self, messages: list[dict[str, str]], max_tokens: int, temperature: float
             ) -> Completion:
        return Completion('{"action": "keep"}', sum(len(m["content"]) for m in messages), 5,
                          "stop")

    def complete(self, prompt: str, max_tokens: int, temperature: float) -> Completion:
        return Completion(" keep", len(prompt), 1, "stop")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpt4all")
    except PackageNotFoundError:
        return "unknown"


def _bad(message: str) -> tuple[int, dict[str, Any]]:
    return 400, {"error": {"message": message, "type": "invalid_request_error"}}


def handle(backend: Backend, lock: threading.Lock, path: str, body: Any
           ) -> tuple[int, dict[str, Any]]:
    """One API request -> (HTTP status, JSON body). Bad requests are 400 with a message."""
    if not isinstance(body, dict):
        return _bad("the body must be a JSON object")
    max_tokens = body.get("max_tokens", 256)
    temperature = body.get("temperature", 0)
    if not isinstance(max_tokens, int) or not 1 <= max_tokens <= N_CTX:
        return _bad(f"max_tokens must be an integer in 1..{N_CTX}")
    if not isinstance(temperature, int | float) or temperature < 0:
        return _bad("temperature must be a number >= 0")
    model = str(body.get("model", backend.name))
    if path == "/v1/chat/completions":
        messages = body.get("messages")
        if not (isinstance(messages, list) and messages and all(
                isinstance(m, dict) and isinstance(m.get("content"), str)
                and m.get("role") in ("system", "user", "assistant") for m in messages)
                and messages[-1]["role"] == "user"):
            return _bad("messages must be a list of {role, content} ending with a user message")
        with lock:
            out = backend.chat(messages, max_tokens, float(temperature))
        choice: dict[str, Any] = {"index": 0, "finish_reason": out.finish_reason,
                                  "message": {"role": "assistant", "content": out.text}}
        kind = "chat.completion"
    elif path == "/v1/completions":
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return _bad("prompt must be a string")
        with lock:
            out = backend.complete(prompt, max_tokens, float(temperature))
        choice = {"index": 0, "finish_reason": out.finish_reason, "text": out.text}
        kind = "text_completion"
    else:
        return 404, {"error": {"message": f"no endpoint {path}", "type": "not_found"}}
    usage = {"prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
             "total_tokens": out.prompt_tokens + out.completion_tokens}
    return 200, {"object": kind, "model": model, "choices": [choice], "usage": usage}


def make_server(backend: Backend, port: int = 0) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj, sort_keys=True).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                # the server's own CPU time: the run's model cost, read on a loaded machine
                self._send(200, {"status": "ok", "model": backend.name, **backend.info,
                                 "cpu_seconds": round(time.process_time(), 2)})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": backend.name,
                                                             "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no endpoint {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            try:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
            except (ValueError, UnicodeDecodeError):
                self._send(*_bad("the body is not JSON"))
                return
            self._send(*handle(backend, lock, self.path, body))

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def _orphan_watch(parent: int) -> None:
    """Exit when the process that started us is gone (no server outlives its experiment)."""
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.transition.llm_server",
                                description=__doc__.splitlines()[0])
    p.add_argument("--model-file", type=Path)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--backend", choices=("gpt4all", "echo"), default="gpt4all")
    args = p.parse_args(argv)
    threading.Thread(target=_orphan_watch, args=(os.getppid(),), daemon=True).start()
    if args.backend == "echo":
        backend: Backend = EchoBackend()
    else:
        if args.model_file is None or not args.model_file.is_file():
            print(f"llm_server: --model-file {args.model_file}: no such file; fix: fetch the "
                  "weights first (experiments.transition.weights)", file=sys.stderr)
            return 2
        try:
            backend = Gpt4AllBackend(args.model_file, args.threads)
        except ImportError:
            print("llm_server: gpt4all is not installed; fix: pip install -e '.[llm]'",
                  file=sys.stderr)
            return 2
    server = make_server(backend, args.port)
    print(json.dumps({"port": server.server_address[1], "pid": os.getpid()}), flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


# --------------------------------------------------------------------------- the parent's side
def get_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


@contextlib.contextmanager
def serve(model_file: Path | None, threads: int = 2, backend: str = "gpt4all",
          start_timeout_s: float = START_TIMEOUT_S) -> Iterator[tuple[str, dict[str, Any]]]:
    """Start the server in a child process, wait until it is loaded and answers /health, yield
    (base URL ending in /v1, the health record); stop it (TERM, then KILL) on the way out, and on
    any error. A server that fails to start is a one-line BadInput carrying its last stderr line."""
    argv = [sys.executable, "-m", "experiments.transition.llm_server", "--threads", str(threads),
            "--backend", backend]
    if model_file is not None:
        argv += ["--model-file", str(model_file)]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONUNBUFFERED="1")
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                                start_new_session=True)

        def fail(problem: str) -> BadInput:
            log.seek(0)
            lines = [ln for ln in log.read().splitlines() if ln.strip()]
            tail = f" ({lines[-1].strip()})" if lines else ""
            return BadInput("llm_server", "start", problem + tail,
                            "see that the [llm] extra is installed and the weights verify")

        try:
            yield _started(proc, fail, start_timeout_s)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def _started(proc: subprocess.Popen, fail: Any, timeout_s: float) -> tuple[str, dict[str, Any]]:
    """Wait for the announced port, then for a healthy /health: (base URL, health record)."""
    box: dict[str, str] = {}
    out = proc.stdout
    assert out is not None
    reader = threading.Thread(target=lambda: box.setdefault("line", out.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    line = box.get("line", "")
    if not line:
        if not reader.is_alive():  # end of output: the server is exiting
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
        raise fail(f"no port announced within {timeout_s:.0f} s" if proc.poll() is None
                   else f"exited with code {proc.returncode}")
    try:
        port = int(json.loads(line)["port"])
    except (ValueError, KeyError, TypeError):
        raise fail(f"announced {line.strip()[:80]!r}, not a port") from None
    health: dict[str, Any] = {}
    for _ in range(50):
        try:
            health = get_json(f"http://127.0.0.1:{port}/health")
            break
        except (urllib.error.URLError, OSError, ValueError):
            time.sleep(0.1)
    if health.get("status") != "ok":
        raise fail("no healthy answer on /health")
    return f"http://127.0.0.1:{port}/v1", health


if __name__ == "__main__":
    sys.exit(main())
