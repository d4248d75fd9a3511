"""A transition run with a local language model (`--coder llm`) or from its stored replies
(`--coder llm --replay DIR`), through the same OpenAI-compatible client as `--coder openai`.

Live: fetch and verify the weights (experiments.transition.weights), start the loopback model
server (experiments.transition.llm_server) and wait for its health check, put the recording proxy
(experiments.transition.replies) in front of it, and hand the experiment a plain `openai` coder
spec whose base URL is the proxy. Replay: the proxy answers from DIR/replies.jsonl; no weights,
no runtime. Either way the experiment writes `replies.jsonl` beside its results, and
`manifest.json` (model file, SHA-256, runtime and version, threads, tokens, wall time, seed, how
the replies compare with an earlier run's). The manifest is the run's log: it is the one file
that differs between a model run and its replay, because it holds timings.

The price is one spend unit per 1,000 tokens, so the meter's budget is a token budget: every call
reserves (prompt bytes + max_tokens) / 1000 before it is sent, as for any OpenAI server.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.results import write_json
from experiments.transition import llm_server, replies, weights
from loopproof.engine.system.errors import BadInput

PRICE_PER_1K = 1.0          # one spend unit per 1,000 tokens: the budget counts tokens
DEFAULT_BUDGET = 100_000.0  # 100 million tokens; a model run at `llm` scale uses about one
TIMEOUT_S = 3600.0          # a slow reply on a loaded machine must not become a client timeout
PROGRESS_EVERY = 10


@dataclass
class Session:
    spec: dict[str, Any]
    proxy: replies.Proxy
    mode: str                                  # "model" | "replay"
    w: weights.Weights
    model_file: Path | None = None
    health: dict[str, Any] = field(default_factory=dict)
    prior: dict[str, dict[str, Any]] | None = None
    source: Path | None = None
    started: float = field(default_factory=time.monotonic)
    server: str | None = None                  # the model server's base URL (live mode)
    cpu_start: float = field(default_factory=lambda: _cpu())

    def finish(self) -> dict[str, str]:
        """Called after the runs, before any result file is written: refuse a void run (model
        server failure, replies missing from a replay); else the reply set to write."""
        if self.proxy.failure:
            raise BadInput("model server", "reply", self.proxy.failure,
                           "rerun; if it fails again, check the server with --scale llm-smoke")
        if self.proxy.misses:
            raise BadInput(str(self.source), "replies", f"{self.proxy.misses} of "
                           f"{self.proxy.requests} requests have no stored reply (the protocol "
                           "changed since the replies were recorded)",
                           "rerun with the model (without --replay) to record them")
        return {replies.FILE: replies.dumps(self.proxy.used)}

    def manifest(self, summary: dict[str, Any]) -> dict[str, Any]:
        p = self.proxy
        tokens = p.tokens()
        out: dict[str, Any] = {
            "experiment": summary.get("experiment"), "scale": summary.get("scale"),
            "seed": summary.get("seed"), "mode": self.mode,
            "model": {"key": self.w.key, "general_name": self.w.general_name,
                      "file": self.w.filename, "size": self.w.size, "sha256": self.w.sha256,
                      "packages": [f"{n}=={self.w.version}" for n, _ in self.w.packages],
                      "verified": self.model_file is not None},
            "runtime": {k: v for k, v in self.health.items()
                        if k not in ("status", "model", "cpu_seconds")},
            "requests": p.requests, "unique_requests": len(p.used), "model_calls": p.model_calls,
            "resumed_replies": p.resumed,
            "tokens": tokens, "model_seconds": round(p.model_seconds, 1),
            "wall_seconds": round(time.monotonic() - self.started, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(),
        }
        out["harness_cpu_seconds"] = round(_cpu() - self.cpu_start, 1)
        # rates count this run's model calls only: resumed replies cost this run nothing
        made = p.called_completion_tokens
        if self.mode == "model" and p.model_seconds > 0:
            out["completion_tokens_per_s"] = round(made / p.model_seconds, 2)
        cpu = self.server_cpu()
        if cpu is not None:
            # CPU seconds do not stretch when other processes share the cores, so they, not
            # the wall clock, say what the run costs on an idle machine
            loaded = float(self.health.get("cpu_seconds") or 0.0)
            out["model_cpu_seconds"] = {"load": round(loaded, 1),
                                        "generation": round(cpu - loaded, 1)}
            if cpu > loaded:
                out["completion_tokens_per_cpu_s"] = round(made / (cpu - loaded), 2)
        if self.prior is not None:
            out["replies_vs_previous_run"] = p.differences(self.prior)
        if self.source is not None:
            out["replayed_from"] = str(self.source)
        return out

    def server_cpu(self) -> float | None:
        """The model server's CPU seconds so far (None in replay or if it does not answer)."""
        if self.server is None:
            return None
        try:
            return float(llm_server.get_json(self.server.removesuffix("/v1") + "/health")
                         ["cpu_seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the candidates' test runs)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _progress(proxy: replies.Proxy, started: float) -> None:
    calls = proxy.model_calls
    if calls and calls % PROGRESS_EVERY == 0:
        t = proxy.tokens()
        print(f"transition[llm]: {proxy.requests} requests, {calls} model calls, "
              f"{t['completion']} completion tokens, {time.monotonic() - started:.0f} s",
              file=sys.stderr, flush=True)


def _spec(w: weights.Weights, base_url: str, budget: float) -> dict[str, Any]:
    return {"kind": "openai", "base_url": base_url, "model": w.filename, "price": PRICE_PER_1K,
            # the client waits longer than the proxy waits for the model, so a slow reply ends
            # as a void run (proxy failure), never as a client timeout the replay cannot repeat
            "budget": budget, "timeout_s": TIMEOUT_S + 600, "label": f"llm-{w.key}",
            "model_name": w.general_name}


@contextmanager
def session(*, key: str, out: Path, replay: Path | None = None, cache: Path | None = None,
            threads: int | None = None, budget: float | None = None) -> Iterator[Session]:
    """The model (or its replay) behind a loopback OpenAI endpoint for one experiment run."""
    if key not in weights.CATALOGUE:
        raise BadInput("--llm", "model", f"unknown model {key!r}",
                       f"choose one of {', '.join(weights.CATALOGUE)}")
    w = weights.CATALOGUE[key]
    budget = DEFAULT_BUDGET if budget is None else budget
    started, cpu0 = time.monotonic(), _cpu()
    with ExitStack() as stack:
        if replay is not None:
            source = replay / replies.FILE
            proxy = replies.Proxy(None, replies.load(source))
            sess = Session({}, proxy, "replay", w, source=source, started=started,
                           cpu_start=cpu0)
            earlier = replay / "manifest.json"
            if earlier.is_file():
                try:
                    sess.health = dict(json.loads(earlier.read_text()).get("runtime") or {})
                except ValueError:
                    sess.health = {}
        else:
            model_file = weights.ensure(w, cache)
            threads = auto_threads() if threads is None else threads
            base, health = stack.enter_context(llm_server.serve(model_file, threads))
            journal = weights.cache_dir(cache) / f"journal-{w.key}-{out.resolve().name}.jsonl"
            proxy = replies.Proxy(base, timeout_s=TIMEOUT_S, journal=journal,
                                  on_call=lambda p: _progress(p, started))
            if proxy.resumed:
                print(f"transition[llm]: resuming an interrupted run: {proxy.resumed} replies "
                      f"from {journal}", file=sys.stderr, flush=True)
            prior = None
            if (out / replies.FILE).is_file():
                try:
                    prior = replies.load(out / replies.FILE)
                except BadInput:
                    prior = None
            sess = Session({}, proxy, "model", w, model_file=model_file, health=health,
                           prior=prior, started=started, server=base, cpu_start=cpu0)
        url = stack.enter_context(replies.running(proxy))
        sess.spec = _spec(w, url, budget)
        yield sess


def write_manifest(out: Path, sess: Session, summary: dict[str, Any]) -> dict[str, Any]:
    """Write manifest.json; the run is complete, so its journal goes."""
    m = sess.manifest(summary)
    write_json(out / "manifest.json", m)
    if sess.proxy.journal is not None:
        sess.proxy.journal.unlink(missing_ok=True)
    return m


def auto_threads() -> int:
    """Two threads on an idle machine, one on a loaded one: llama.cpp's threads wait for each
    other at every layer, and on an oversubscribed machine two threads ran 15 times slower than
    one (bench/llm.py measures both side by side)."""
    return 2 if os.getloadavg()[0] < 1.0 else 1
