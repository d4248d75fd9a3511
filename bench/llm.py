"""Tokens per second of the local model (`python -m bench --only llm_tokens`), one CPU thread
against two, side by side.

Why a ratio of thread counts: the transition experiment's model runs take most of an hour, and
the thread count is the one knob that matters. llama.cpp's threads meet at a barrier after every
layer, so on a machine shared with other work a second thread can make generation much slower
instead of faster. Each round starts the loopback model server of experiments.transition (the
same path the experiment uses) with 1 and then 2 threads, alternating, and times one fixed
completion; best of `ROUNDS` per count. The load average is recorded with the figures.

Runs only when asked for by name (`--only llm_tokens`, as `make reproduce-llm` does), and is
skipped with the reason when the [llm] extra or the verified weights are absent; fetch them with
`python -m experiments.transition.weights`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import Any

from bench.registry import register

ROUNDS = 2
MAX_TOKENS = 64
PROMPT = ("<|im_start|>user\nWrite a Python function merge_sort(xs) that sorts a list of integers,"
          " with a docstring.<|im_end|>\n<|im_start|>assistant\n")


def _model_path() -> str | None:
    proc = subprocess.run([sys.executable, "-m", "experiments.transition.weights", "--no-fetch"],
                          capture_output=True, text=True, timeout=600)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _timed(model: str, threads: int) -> dict[str, Any]:
    """Start the server with `threads`, time one completion, stop it."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    proc = subprocess.Popen([sys.executable, "-m", "experiments.transition.llm_server",
                             "--model-file", model, "--threads", str(threads)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["port"]
        body = json.dumps({"prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
        t = time.perf_counter()
        with urllib.request.urlopen(req, timeout=1800) as resp:
            usage = json.loads(resp.read())["usage"]
        seconds = time.perf_counter() - t
    finally:
        proc.terminate()
        proc.wait(30)
    return {"seconds": seconds, "completion_tokens": usage["completion_tokens"],
            "prompt_tokens": usage["prompt_tokens"]}


def bench_llm(args: argparse.Namespace) -> dict:
    if "llm_tokens" not in (getattr(args, "only", None) or ()):
        # minutes of model time: only on request, so `make reproduce` stays off the model
        return {"skipped": "runs only with --only llm_tokens (make reproduce-llm)"}
    try:
        import gpt4all  # noqa: F401  (only to know whether the extra is there)
    except ImportError:
        return {"skipped": "gpt4all is not installed; fix: pip install -e '.[llm]'"}
    model = _model_path()
    if model is None:
        return {"skipped": "weights not fetched; fix: python -m experiments.transition.weights"}
    load_before = round(os.getloadavg()[0], 2)
    best: dict[int, dict[str, Any]] = {}
    for _ in range(ROUNDS):
        for threads in (1, 2):
            r = _timed(model, threads)
            if threads not in best or r["seconds"] < best[threads]["seconds"]:
                best[threads] = r
    rate = {t: round(r["completion_tokens"] / r["seconds"], 2) for t, r in best.items()}
    return {
        "model_file": os.path.basename(model), "runtime": "gpt4all (llama.cpp), CPU",
        "max_tokens": MAX_TOKENS, "rounds": ROUNDS,
        "prompt_tokens": best[1]["prompt_tokens"],
        "completion_tokens": {str(t): r["completion_tokens"] for t, r in best.items()},
        "seconds": {str(t): round(r["seconds"], 2) for t, r in best.items()},
        "tokens_per_s": {str(t): v for t, v in rate.items()},
        "ratio_2_threads_to_1": round(rate[2] / rate[1], 2) if rate[1] else None,
        "load_average_1min": [load_before, round(os.getloadavg()[0], 2)],
        "note": "one fixed completion per run, prompt processing included; best of rounds; "
                "1 and 2 threads alternating",
    }


register("llm_tokens", bench_llm)
