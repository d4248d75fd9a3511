"""Exact prompt counts (`tokenize`, engine/run/proxy/tokens.py) never reserve below what the
upstream bills: over drawn chats (messages, tools, streamed or not) and completions, through a
real proxy and meter, against an upstream whose vLLM-like `/tokenize` counts what its usage
reports, every call's prompt bound is >= its usage and is the upstream's count. An upstream
without `/tokenize` keeps the byte bound and is asked once; one whose count is below its usage
(a `/tokenize` that skips the chat template: the planted fault) is caught by the same check."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fake_openai import Reply, fake_openai
from tests.support.proxy_helpers import run_calls

words = st.lists(st.sampled_from(["fix", "the", "bug", "in", "calc.py", "{", "}", "é", "x"]),
                 min_size=0, max_size=30).map(" ".join)
messages = st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["system", "user", "assistant"]), "content": words}),
    min_size=1, max_size=4)
tool = {"type": "function", "function": {"name": "bash", "description": "run a command",
                                          "parameters": {"type": "object", "properties": {
                                              "command": {"type": "string"}}}}}
calls = st.lists(st.fixed_dictionaries({
    "messages": messages, "tools": st.booleans(), "stream": st.booleans(),
    "completions": st.booleans()}), min_size=1, max_size=3)


def _send(s, c) -> None:
    more = {"stream": True, "stream_options": {"include_usage": True}} if c["stream"] else {}
    if c["completions"]:
        text = " ".join(m["content"] for m in c["messages"])
        s.request("POST", "/v1/completions", {"model": "fake-model", "prompt": text, **more})
    else:
        s.request("POST", "/v1/chat/completions", {
            "model": "fake-model", "messages": c["messages"],
            **({"tools": [tool]} if c["tools"] else {}), **more})


def _run(tmp, schedule, tokenize: str | None):
    with fake_openai([]) as up:
        up.tokenize = tokenize
        up.default = Reply("done now")
        out = run_calls(tmp, up.base_url, lambda s: [_send(s, c) for c in schedule],
                        ceiling=50.0, budget=50.0, max_tokens=16)
        asked = len(up.counted)
    return [r for r in out.records if r["type"] == "llm_call"], asked


@settings(max_examples=15)
@given(calls)
def test_the_reservation_is_never_below_the_upstreams_usage(tmp_path_factory, schedule):
    recs, asked = _run(tmp_path_factory.mktemp("count"), schedule, "exact")
    assert len(recs) == len(schedule) == asked
    for r in recs:
        assert r["usage"] == "reported" and r["prompt_counted_by"] == "tokenize"
        assert r["prompt_bound"] >= r["prompt_tokens"]  # exact here: equal
        assert r["charged"] <= r["reserved"]


def test_an_upstream_that_cannot_count_keeps_the_byte_bound_and_is_asked_once(tmp_path):
    schedule = [{"messages": [{"role": "user", "content": "hello there"}], "tools": False,
                 "stream": False, "completions": False}] * 3
    recs, asked = _run(tmp_path, schedule, None)
    assert asked == 1 and [r["prompt_counted_by"] for r in recs] == ["bytes"] * 3
    body = json.dumps({"model": "fake-model", "messages": schedule[0]["messages"],
                       "max_tokens": 16}, separators=(",", ":")).encode()
    assert recs[0]["prompt_bound"] == len(body)


def test_a_count_that_skips_the_chat_template_is_below_the_usage(tmp_path):
    schedule = [{"messages": [{"role": "system", "content": "you fix bugs"},
                              {"role": "user", "content": "fix calc.py"}], "tools": True,
                 "stream": False, "completions": False}]
    recs, _ = _run(tmp_path, schedule, "text")
    # the planted fault the property above would catch: a bound below the billed prompt (the
    # usage is then not believed, and the call is charged its whole reservation)
    assert recs[0]["prompt_bound"] < 12 and recs[0]["usage"] == "implausible"
    assert recs[0]["charged"] == recs[0]["reserved"]
