"""Property: no schedule of model calls -- in any API shape (OpenAI chat, Anthropic Messages,
OpenAI Responses), streamed or not, concurrent or not, honest or lying or failing upstream, with
or without a crash -- makes settled + reserved exceed B at any ledger prefix.

A crash is a SIGKILL at any point: what it leaves is a prefix of the records (a write that
returned is in the kernel; docs/engine.md "Durability"), possibly with a torn last line. So each
example cuts the finished ledger at a drawn record boundary (or through a record), resumes it,
and checks every prefix of the recovered ledger too, computed from the records' own amounts
(experiments/crash/study.py `prefix_excess`), not through the engine's replay.
"""

from __future__ import annotations

import contextlib
import json
import threading

from hypothesis import event, given, settings
from hypothesis import strategies as st

from experiments.crash.observables import prefix_excess
from loopproof.engine.run.runner import Runner
from tests.support.fake_apis import fake_upstream
from tests.support.fake_openai import Reply
from tests.support.proxy_helpers import run_calls

EPS = 1e-9

calls = st.fixed_dictionaries({
    "shape": st.sampled_from(["chat", "chat", "messages", "responses"]),
    "stream": st.booleans(),
    "broken": st.sampled_from([None, None, None, "break", "fail"]),
    "cache": st.sampled_from([0, 0, 30]),
    "usage": st.sampled_from(["true", "missing", "low", "high", "string"]),
    "extra": st.sampled_from([0, 0, 5, 40]),
    "prompt": st.integers(1, 3000),
    "max_tokens": st.sampled_from([None, 4, 16, 200]),
    "status": st.sampled_from([200, 200, 200, 500]),
})
schedules = st.lists(st.lists(calls, min_size=1, max_size=4), min_size=1, max_size=4)


def _run_group(s, group):
    def one(c):
        more: dict = {"stream": True} if c["stream"] else {}
        if c["shape"] == "chat" and c["stream"]:
            more["stream_options"] = {"include_usage": True}
        if c["max_tokens"] is not None:
            more["max_output_tokens" if c["shape"] == "responses" else "max_tokens"] = \
                c["max_tokens"]
        send = {"chat": s.chat, "messages": s.messages, "responses": s.responses}[c["shape"]]
        with contextlib.suppress(OSError):
            send("p" * c["prompt"], **more)
    threads = [threading.Thread(target=one, args=(c,)) for c in group]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@settings(max_examples=30)
@given(schedules, st.sampled_from([1.0, 2.5, 6.0, 12.0]), st.floats(0.0, 1.0),
       st.sampled_from(["none", "anywhere", "mid_call"]), st.booleans())
def test_no_call_schedule_overspends_at_any_prefix(tmp_path_factory, schedule, budget, cut_at,
                                                    crash, torn):
    tmp = tmp_path_factory.mktemp("sched")
    script = [Reply(" ".join(["w"] * 6), usage=c["usage"], extra_tokens=c["extra"],
                    status=c["status"], break_stream=c["broken"] == "break",
                    fail_stream=c["broken"] == "fail", cache_read=c["cache"],
                    cache_write=c["cache"] if c["shape"] == "messages" else 0)
              for g in schedule for c in g]
    with fake_upstream(script) as up:
        def body(s):
            if s.out.get("resumed"):
                return None  # the re-run after the crash makes no call: nothing is replayed
            for group in schedule:
                _run_group(s, group)
            return None
        out = run_calls(tmp, up.base_url, body, ceiling=budget, budget=budget)
        sent = len(up.requests)
    assert prefix_excess(out.records) <= EPS
    event(f"{sum(c['refused'] for c in out.calls())} refused" if out.calls() else "no call")
    held = [r for r in out.records if r["type"] == "reserve" and r.get("what") == "llm"]
    assert len(held) == sent  # every forwarded call was reserved first, and only those
    if crash == "none":
        return
    lines = out.ledger.read_bytes().splitlines(keepends=True)
    k = 1 + int(cut_at * (len(lines) - 2))
    mid = [i + 1 for i, r in enumerate(out.records) if r["type"] == "reserve"
           and r.get("what") == "llm"]
    if crash == "mid_call" and mid:  # SIGKILL right after a call's reserve reached the disk
        k = mid[int(cut_at * (len(mid) - 1))]
    cut = tmp / "crashed.jsonl"
    data = b"".join(lines[:k]) + (lines[k][: len(lines[k]) // 2] if torn else b"")
    cut.write_bytes(data)
    out.out["resumed"] = True
    runner = Runner.resume(cut)
    runner.continue_run()
    runner.close()
    recs = [json.loads(x) for x in cut.read_text().splitlines()]
    assert prefix_excess(recs) <= EPS
    before = [r for r in recs[:k] if r.get("what") == "llm"]
    opened = sum(r["type"] == "reserve" for r in before) - sum(r["type"] == "settle"
                                                               for r in before)
    after = recs[[r["type"] for r in recs].index("resumed"):]
    assert not [r for r in after if r.get("what") == "llm"]  # no call is replayed on resume
    event(f"crash with {min(opened, 2)}{'+' if opened > 2 else ''} calls open")
    if opened:  # a crash during a call: the abandon charges its reservation
        (abandon,) = [r for r in after if r["type"] == "abandon"]
        assert abandon["charged"] >= sum(r["amount"] for r in before
                                         if r["type"] == "reserve") - sum(
            r["of"] for r in before if r["type"] == "settle") - 1e-6
