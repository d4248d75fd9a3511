"""Metered model calls for any agent: an OpenAI-compatible proxy per attempt.

Why a proxy: an agent CLI spends money in calls the engine never sees. Here the worker gets
`OPENAI_BASE_URL` pointing at a proxy the runner starts for the attempt (reachable through a
Unix socket bound into the worker's sandbox, relayed to a loopback port by `bridge.py`) and an
`OPENAI_API_KEY` that is a per-attempt token, worthless outside it. The upstream key stays in the
engine. Each call reserves an upper bound of its cost through the attempt's meter *before* it is
forwarded (`Reserve`), is settled with the upstream's usage (`Settle`), and is recorded.

Modules: `config` (the `[node.<name>.llm]` table), `pricing` (the bound of a call and the
plausibility of a usage), `store` (content-addressed, redacted bodies), `server` (the HTTP
proxy: its life, refusals, endpoints), `call` (one metered call: hold, forward, relay, settle,
record), `access` (what an attempt's worker is given), `bridge` (a stdlib-only relay run inside the sandbox).
"""

from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.server import Proxy

__all__ = ["LlmConfig", "Proxy"]
