"""The `[node.<name>.llm]` table: which upstream a node's worker may call, and at what price.

Why here and not in spec.py: the proxy, its tests and the spec loader all read the same fields;
the loader (engine/run/spec.py) only calls `parse` and turns a problem into its one-line
refusal. Every field is documented in docs/proxy.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from loopproof.engine.system import secret_env

FIELDS = ("upstream", "api_key_env", "price_prompt_per_1k", "price_completion_per_1k",
          "price_cache_read_per_1k", "price_cache_write_per_1k", "max_tokens", "timeout_s",
          "on_refusal", "tokenize")
# When a cache price is not given: a cached prompt token read at the full prompt price, and a
# token written to the cache at twice it. Why these never under-count a provider's bill:
# providers bill a cache read below an uncached token (Anthropic 0.1x, OpenAI 0.1x to 0.5x,
# DeepSeek less than a miss) and a cache write at most twice (Anthropic: 1.25x for a 5-minute
# entry, 2x for a 1-hour one; OpenAI and DeepSeek write for free, billed as a plain prompt).
CACHE_READ_FACTOR, CACHE_WRITE_FACTOR = 1.0, 2.0
ON_REFUSAL = ("end-attempt", "continue")  # what a 402 does to the attempt (docs/proxy.md)
TOKENIZE = ("auto", "vllm", "none")  # how the upstream counts a prompt's tokens
DEFAULT_TIMEOUT_S = 300.0  # wall clock of one upstream call


@dataclass(frozen=True)
class LlmConfig:
    """One node's model access. `api_key_env` names the engine's variable holding the upstream
    key (None: the upstream needs none); the key itself is read by `key()` and never stored."""

    upstream: str
    api_key_env: str | None = None
    price_prompt_per_1k: float = 0.0
    price_completion_per_1k: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = DEFAULT_TIMEOUT_S
    # "end-attempt": the first 402 stops the worker once its calls in flight are settled, and
    # the attempt goes on to its gate; "continue": the worker decides what a 402 means
    on_refusal: str = "end-attempt"
    tokenize: str = "auto"  # engine/run/proxy/tokens.py: exact prompt counts where offered
    # spend units per 1,000 prompt tokens read from / written to the provider's prompt cache;
    # None: derived from price_prompt_per_1k (CACHE_READ_FACTOR, CACHE_WRITE_FACTOR)
    price_cache_read_per_1k: float | None = None
    price_cache_write_per_1k: float | None = None

    @property
    def cache_read_price(self) -> float:
        return (self.price_prompt_per_1k * CACHE_READ_FACTOR
                if self.price_cache_read_per_1k is None else self.price_cache_read_per_1k)

    @property
    def cache_write_price(self) -> float:
        return (self.price_prompt_per_1k * CACHE_WRITE_FACTOR
                if self.price_cache_write_per_1k is None else self.price_cache_write_per_1k)

    def key(self) -> str | None:
        """The upstream key, whether or not the engine has taken it out of its environment."""
        return None if self.api_key_env is None else secret_env.peek(self.api_key_env)

    def table(self) -> dict[str, Any]:
        out: dict[str, Any] = {"upstream": self.upstream,
                               "price_prompt_per_1k": self.price_prompt_per_1k,
                               "price_completion_per_1k": self.price_completion_per_1k,
                               "max_tokens": self.max_tokens, "timeout_s": self.timeout_s,
                               "on_refusal": self.on_refusal, "tokenize": self.tokenize}
        if self.api_key_env is not None:
            out["api_key_env"] = self.api_key_env
        for f in ("price_cache_read_per_1k", "price_cache_write_per_1k"):
            if getattr(self, f) is not None:  # absent: derived (kept out, as older specs)
                out[f] = getattr(self, f)
        return out


Problem = Callable[[str, str, str], Exception]  # (field, problem, fix) -> the error to raise


def parse(table: Any, problem: Problem) -> LlmConfig:
    """Validate a TOML table; raise `problem(field, what is wrong, the fix)` on bad input."""
    if not isinstance(table, dict):
        raise problem("llm", "is not a table", 'write [node.<name>.llm] with upstream = "..."')
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise problem(f"llm.{unknown[0]}", "is not a field of the llm table",
                      f"use only {', '.join(FIELDS)}")
    up = table.get("upstream")
    if not isinstance(up, str) or not up:
        raise problem("llm.upstream", "is missing", 'set upstream = "http://host:port/v1"')
    parts = urlsplit(up)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise problem("llm.upstream", f"{up!r} is not an http(s) URL",
                      'set upstream = "http://host:port/v1"')
    if parts.username or parts.password or parts.query or parts.fragment:
        raise problem("llm.upstream", "carries credentials, a query or a fragment",
                      "give the base URL only; put the key in the variable api_key_env names")
    key_env = table.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not key_env.isidentifier()):
        raise problem("llm.api_key_env", f"{key_env!r} is not a variable name",
                      'name the engine\'s environment variable, e.g. api_key_env = "UPSTREAM_KEY"')
    prices: dict[str, float | None] = {}
    for f in ("price_prompt_per_1k", "price_completion_per_1k", "price_cache_read_per_1k",
              "price_cache_write_per_1k"):
        v = table.get(f, 0.0 if f in ("price_prompt_per_1k", "price_completion_per_1k")
                      else None)
        if v is None:
            prices[f] = None
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise problem(f"llm.{f}", f"{v!r} is not a number >= 0",
                          f"set {f} to the spend units per 1,000 tokens")
        prices[f] = float(v)
    mt = table.get("max_tokens", 1024)
    if isinstance(mt, bool) or not isinstance(mt, int) or not 1 <= mt <= 1_000_000:
        raise problem("llm.max_tokens", f"{mt!r} is not an integer in 1..1000000",
                      "set max_tokens to the most completion tokens one call may ask for")
    t = table.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
        raise problem("llm.timeout_s", f"{t!r} is not a number > 0",
                      "set timeout_s to the wall clock one upstream call may take")
    choices = {"on_refusal": ON_REFUSAL, "tokenize": TOKENIZE}
    picked = {}
    for f, allowed in choices.items():
        v = table.get(f, allowed[0])
        if v not in allowed:
            raise problem(f"llm.{f}", f"{v!r} is not one of {list(allowed)}",
                          f'write {f} = "{allowed[0]}" (or leave it out)')
        picked[f] = v
    return LlmConfig(up.rstrip("/"), key_env, prices["price_prompt_per_1k"] or 0.0,
                     prices["price_completion_per_1k"] or 0.0, mt, float(t),
                     picked["on_refusal"], picked["tokenize"],
                     prices["price_cache_read_per_1k"], prices["price_cache_write_per_1k"])
