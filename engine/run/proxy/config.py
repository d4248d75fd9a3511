"""The `[node.<name>.llm]` table: which upstream a node's worker may call, and at what price.

Why here and not in spec.py: the proxy, its tests and the spec loader all read the same fields;
the loader (engine/run/spec.py) only calls `parse` and turns a problem into its one-line
refusal. Every field is declared once in `LLM` (engine/system/fields.py), with its line of doc;
docs/proxy.md's table of the fields is printed from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from loopproof.engine.system import secret_env
from loopproof.engine.system.fields import (
    ABSENT,
    Fail,
    Field,
    Refusal,
    Table,
    Verdict,
    integer,
    number,
    one_of,
    short,
)

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


def _upstream(v: Any) -> Verdict:
    if not isinstance(v, str) or not v:
        return "is missing"
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{short(v)} is not an http(s) URL"
    if parts.username or parts.password or parts.query or parts.fragment:
        return Refusal("carries credentials, a query or a fragment",
                       "give the base URL only; put the key in the variable api_key_env names")
    return None


def _variable(v: Any) -> Verdict:
    if isinstance(v, str) and v.isidentifier():
        return None
    return f"{short(v)} is not a variable name"


def _price(name: str, doc: str, default: Any = 0.0, shown: str = "") -> Field:
    return Field(name, "a number >= 0", doc, number(0.0, math.inf), "0.15",
                 fix=f"set {name} to the spend units per 1,000 tokens", default=default,
                 shown_default=shown)


LLM = Table("[node.NAME.llm]", (
    Field("upstream", "an http(s) URL", "base URL of the model server, ending where the API's "
          "path after `/v1` is appended: `/v1` for every shape (`.../v1` + `/chat/completions`, "
          "`/responses`, `/messages`; e.g. `https://api.anthropic.com/v1`, "
          "`https://api.openai.com/v1`). No credentials, query or fragment in it", _upstream,
          '"http://host:port/v1"', fix='set upstream = "http://host:port/v1"',
          add='set upstream = "http://host:port/v1"'),
    Field("api_key_env", "a variable name", "name of the engine's environment variable that "
          "holds the upstream key, sent as `Authorization: Bearer` in the OpenAI shapes and as "
          "`x-api-key` in Anthropic's. It must be set when `loopproof run` / `resume` starts "
          "(else exit 2). Omit it for an upstream that takes no key", _variable,
          fix='name the engine\'s environment variable, e.g. api_key_env = "UPSTREAM_KEY"',
          default=ABSENT),
    _price("price_prompt_per_1k", "spend units per 1,000 prompt tokens (neither read from nor "
           "written to a cache)"),
    _price("price_completion_per_1k", "spend units per 1,000 completion tokens (output, "
           "reasoning and thinking included)"),
    _price("price_cache_read_per_1k", "spend units per 1,000 prompt tokens the upstream read "
           "from its prompt cache (OpenAI `cached_tokens`, Anthropic "
           "`cache_read_input_tokens`)", ABSENT, "`price_prompt_per_1k`"),
    _price("price_cache_write_per_1k", "spend units per 1,000 prompt tokens the upstream wrote "
           "to its cache (Anthropic `cache_creation_input_tokens`)", ABSENT,
           "2 x `price_prompt_per_1k`"),
    Field("max_tokens", "an integer from 1 to 1000000", "the most completion tokens one choice "
          "may ask for: a request asking for more, or for none, is rewritten to ask for this "
          "(`max_tokens`, `max_completion_tokens`, `max_output_tokens`)",
          integer(1, 1_000_000), fix="set max_tokens to the most completion tokens one call "
          "may ask for", default=1024),
    Field("timeout_s", "seconds > 0", "seconds one upstream call may take",
          number(0.0, math.inf, above=True), fix="set timeout_s to the wall clock one "
          "upstream call may take", default=DEFAULT_TIMEOUT_S),
    Field("on_refusal", " or ".join(f'`"{o}"`' for o in ON_REFUSAL), '"end-attempt": the '
          "first call refused (`402`) stops the worker once the calls it has in flight are "
          'settled, and its gate judges what it left; "continue": the attempt goes on and the '
          "agent decides what a `402` means", one_of(ON_REFUSAL),
          fix=f'write on_refusal = "{ON_REFUSAL[0]}" (or leave it out)', default=ON_REFUSAL[0]),
    Field("tokenize", " or ".join(f'`"{o}"`' for o in TOKENIZE), "how the prompt part of a "
          'call\'s bound is counted: "auto" asks the upstream\'s `/tokenize` once per attempt '
          'and uses it while it answers (vLLM), else the byte bound; "vllm" always asks; '
          '"none" never asks', one_of(TOKENIZE),
          fix=f'write tokenize = "{TOKENIZE[0]}" (or leave it out)', default=TOKENIZE[0]),
), prefix="llm.")
FIELDS = tuple(LLM.by_name)


def parse(table: Any, problem: Fail, title: str | None = None) -> LlmConfig:
    """Validate a TOML table; raise `problem(field, what is wrong, the fix)` on bad input
    (`title`: the table as errors name it, "[node.fix.llm]")."""
    if not isinstance(table, dict):
        raise problem("llm", "is not a table", 'write [node.<name>.llm] with upstream = "..."')
    v = LLM.read(table, problem, title=title)
    return LlmConfig(v["upstream"].rstrip("/"), v.get("api_key_env"),
                     float(v["price_prompt_per_1k"]), float(v["price_completion_per_1k"]),
                     v["max_tokens"], float(v["timeout_s"]), v["on_refusal"], v["tokenize"],
                     _float(v.get("price_cache_read_per_1k")),
                     _float(v.get("price_cache_write_per_1k")))


def _float(v: float | None) -> float | None:
    return None if v is None else float(v)
