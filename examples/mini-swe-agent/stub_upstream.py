"""A scripted OpenAI-compatible upstream for the mini-swe-agent example: it plays the model of
an agent that fixes `calc.py` in three tool calls (copy the project and run its test, fix the
bug, submit), one step per assistant turn already in the conversation, and logs every request
with the usage it reports (the ground truth of what was spent).

It also answers vLLM's `/tokenize` with the same count it reports as `usage.prompt_tokens`, so
the proxy reserves the exact prompt (engine/run/proxy/tokens.py); `--no-tokenize` answers 404
there, like an upstream that cannot count, and the proxy keeps its byte bound.

    python stub_upstream.py [--port 18090] [--log requests.jsonl] [--no-tokenize]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any


def _load_sibling() -> Any:
    """The other example's stand-in upstream, by path (its quiet JSON handler is shared)."""
    path = Path(__file__).resolve().parent.parent / "agent-under-budget" / "stub_upstream.py"
    spec = importlib.util.spec_from_file_location("agent_under_budget_stub", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


JsonHandler = _load_sibling().JsonHandler

STEPS = [
    "cp -r inputs/project/. . && python3 test_calc.py",
    "sed -i 's/return a - b/return a + b/' calc.py && python3 test_calc.py",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
]
THOUGHTS = ["Let me copy the project and run its test.", "The test fails: add subtracts. "
            "Let me fix it.", "The test passes; I am done."]


def prompt_tokens(body: dict[str, Any]) -> int:
    """The stub's tokenizer: a word is a token; its chat template adds 4 a message, 3 for the
    generation prompt and one per 4 bytes of the tools' JSON."""
    msgs = body.get("messages") or []
    words = sum(len(json.dumps(m.get("content") or "").split()) for m in msgs)
    tools = len(json.dumps(body["tools"])) // 4 if body.get("tools") else 0
    return words + 4 * len(msgs) + 3 + tools


def answer(body: dict[str, Any]) -> dict[str, Any]:
    step = min(sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant"),
               len(STEPS) - 1)
    call = {"id": f"call_{step}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": STEPS[step]})}}
    completion = len(THOUGHTS[step].split()) + len(STEPS[step].split()) + 5
    p = prompt_tokens(body)
    return {"id": f"stub-{step}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": THOUGHTS[step],
                                     "tool_calls": [call]}}],
            "usage": {"prompt_tokens": p, "completion_tokens": completion,
                      "total_tokens": p + completion}}


def serve(port: int, log: str | None, tokenize: bool) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(JsonHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/tokenize":
                if not tokenize:
                    return self.send(404, {"detail": "Not Found"})
                n = prompt_tokens(body)
                return self.send(200, {"count": n, "max_model_len": 32768, "tokens": [0] * n})
            if not self.path.endswith("/chat/completions"):
                return self.send(404, {"error": {"message": "not here", "type": "invalid"}})
            doc = answer(body)
            if log:
                with lock, open(log, "a") as f:
                    f.write(json.dumps({"path": self.path, "usage": doc["usage"],
                                        "max_tokens": body.get("max_tokens"),
                                        "t": time.time()}) + "\n")
            return self.send(200, doc)

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18090)
    ap.add_argument("--log", default=None)
    ap.add_argument("--no-tokenize", action="store_true")
    a = ap.parse_args()
    serve(a.port, a.log, not a.no_tokenize).serve_forever()
