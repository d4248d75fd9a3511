"""Exact prompt counts from an upstream that can count tokens: vLLM's `/tokenize`.

Why: the byte bound (a BPE token is at least one byte) holds for any upstream but is several
times the real prompt (JSON punctuation and template words count as tokens), so an agent is
refused while most of its c_v is left. vLLM's server answers `POST /tokenize` with the prompt's
token count after its chat template (`{"model", "messages", "tools", "add_generation_prompt"}`
-> `{"count", "max_model_len", "tokens"}`; `{"model", "prompt"}` for /v1/completions): exactly
the `usage.prompt_tokens` of the call, so the reservation is that count plus the completion cap.

`tokenize = "auto"` (the default) asks once per attempt's proxy: an upstream that does not
answer /tokenize with an integer count (a 404 from OpenAI, llama.cpp's server, whose /tokenize
takes raw text without the chat template, so its count would be too low) is not asked again
and every call keeps the byte bound. `"vllm"` always asks (a failed ask falls back to the byte
bound for that call); `"none"` never asks. A count is used only if it is an integer from 1 to
the byte bound: a larger one means the upstream counts differently, and the byte bound stays.
A count that is too low (an upstream that lies) cannot overspend: a usage above the
reservation is not believed, and the call is charged its reservation (engine/run/proxy/call.py).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
from collections.abc import Callable
from typing import Any

from loopproof.engine.run.proxy.shape import CHAT, COMPLETIONS

ASK_TIMEOUT_S = 10.0
# request fields vLLM's chat template reads besides messages: passed on as they are
TEMPLATE_FIELDS = ("tools", "chat_template", "chat_template_kwargs", "add_generation_prompt",
                   "continue_final_message", "add_special_tokens", "documents")


def ask_body(endpoint: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The /tokenize request counting the prompt of `body`, or None when it cannot be asked
    (a completions request with several prompts or token lists)."""
    if endpoint == CHAT:
        out = {"model": body.get("model"), "messages": body.get("messages"),
               "add_generation_prompt": True}
        out.update({k: body[k] for k in TEMPLATE_FIELDS if k in body})
        return out
    if endpoint == COMPLETIONS and isinstance(body.get("prompt"), str):
        return {"model": body.get("model"), "prompt": body["prompt"]}
    return None


class PromptCounter:
    """Counts prompts through the upstream's /tokenize while it answers (see the module)."""

    def __init__(self, mode: str, connect: Callable[[float], http.client.HTTPConnection],
                 path: str, headers: Callable[[int], dict[str, str]]) -> None:
        self.mode, self.connect, self.path, self.headers = mode, connect, path, headers
        self.works: bool | None = {"none": False, "vllm": True}.get(mode)  # None: not known
        self._lock = threading.Lock()

    def count(self, endpoint: str, body: dict[str, Any], byte_bound: int) -> int | None:
        """The prompt's tokens as the upstream counts them, or None (keep the byte bound)."""
        if self.works is False:
            return None
        ask = ask_body(endpoint, body)
        if ask is None:
            return None
        got = self._ask(json.dumps(ask).encode())
        with self._lock:
            if self.mode == "auto" and self.works is None:
                self.works = got is not None  # asked once: an upstream without it is left be
        if got is None or not 1 <= got <= byte_bound:
            return None
        return got

    def _ask(self, data: bytes) -> int | None:
        try:
            conn = self.connect(ASK_TIMEOUT_S)
            try:
                conn.request("POST", self.path, body=data, headers=self.headers(len(data)))
                resp = conn.getresponse()
                raw = resp.read(1 << 22)
                if resp.status != 200:
                    return None
            finally:
                with contextlib.suppress(OSError):
                    conn.close()
            doc = json.loads(raw)
        except (OSError, ValueError, http.client.HTTPException):
            return None
        n = doc.get("count") if isinstance(doc, dict) else None
        return n if isinstance(n, int) and not isinstance(n, bool) else None
