"""Property, for every API shape: a call's reservation is never below what an honest upstream
bills for it. Over drawn calls (OpenAI chat, Anthropic Messages with system prompts, client and
Anthropic-defined tools and tool results, OpenAI Responses with instructions, tools and chains
of stored responses; streamed or not; prompt tokens read from and written to the cache;
reasoning) against upstreams that count as high as an honest one can (tests/support/fake_apis.py: a
token per byte of every string, plus what the provider adds unseen), every call's usage is
believed (its prompt within the prompt bound, its output within max tokens) and charged exactly
its price, each kind of token at its own, at most its reservation."""

from __future__ import annotations

import json
import math

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.support.fake_apis import fake_upstream
from tests.support.fake_openai import Reply
from tests.support.proxy_helpers import run_calls

PRICES = {"price_prompt_per_1k": 0.5, "price_completion_per_1k": 2.0,
          "price_cache_read_per_1k": 0.05, "price_cache_write_per_1k": 0.625}

words = st.lists(st.sampled_from(["fix", "the", "bug", "in", "calc.py", "{", "é", "日本", "x"]),
                 min_size=0, max_size=20).map(" ".join)
calls = st.lists(st.fixed_dictionaries({
    "shape": st.sampled_from(["chat", "messages", "responses"]),
    "text": words, "system": words, "turns": st.integers(1, 3),
    "tools": st.integers(0, 2), "typed": st.integers(0, 2), "stream": st.booleans(),
    "chain": st.booleans(), "cache_read": st.integers(0, 40), "cache_write": st.integers(0, 40),
    "reasoning": st.integers(0, 6), "max_tokens": st.sampled_from([None, 3, 20, 128000]),
}), min_size=1, max_size=4)


def _tool(i: int, shape: str) -> dict:
    schema = {"type": "object", "properties": {"cmd": {"type": "string"}}}
    if shape == "messages":
        return {"name": f"t{i}", "input_schema": schema}
    if shape == "responses":
        return {"type": "function", "name": f"t{i}", "parameters": schema}
    return {"type": "function", "function": {"name": f"t{i}", "parameters": schema}}


def _send(s, c, last: dict) -> None:
    more: dict = {"stream": c["stream"]}
    tools = [_tool(i, c["shape"]) for i in range(c["tools"])]
    if c["shape"] == "chat":
        msgs = [{"role": "system", "content": c["system"]}] + [
            {"role": "user", "content": c["text"]}] * c["turns"]
        if c["stream"]:
            more["stream_options"] = {"include_usage": True}
        if c["max_tokens"]:
            more["max_tokens"] = c["max_tokens"]
        s.request("POST", "/v1/chat/completions", {"model": "m", "messages": msgs,
                                                   **({"tools": tools} if tools else {}),
                                                   **more})
    elif c["shape"] == "messages":
        tools += [{"type": "bash_20250124", "name": "bash"}] * c["typed"]
        turns = [{"role": "user", "content": c["text"]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "t0",
                                                    "input": {"cmd": c["text"]}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                               "content": c["text"]}]}][:c["turns"]]
        s.messages(turns[0]["content"], system=c["system"], **({"tools": tools} if tools
                                                              else {}),
                   **({"max_tokens": c["max_tokens"]} if c["max_tokens"] else {}), **more,
                   **({"messages": turns} if c["turns"] > 1 else {}))
    else:
        if c["chain"] and last.get("id"):
            more["previous_response_id"] = last["id"]
        if c["max_tokens"]:
            more["max_output_tokens"] = c["max_tokens"]
        items = [{"role": "user", "content": c["text"]}] * c["turns"]
        status, _, data = s.responses(items, instructions=c["system"],
                                      **({"tools": tools} if tools else {}), **more)
        if status == 200:
            last["id"] = _response_id(data)


def _response_id(data: bytes) -> str | None:
    for line in data.splitlines():
        if line.startswith(b"data: ") or line.startswith(b"{"):
            doc = json.loads(line[6:] if line.startswith(b"data: ") else line)
            rid = doc.get("id") or (doc.get("response") or {}).get("id")
            if rid:
                return rid
    return None


def _price(r: dict) -> float:
    plain = r["prompt_tokens"] - r["cache_read_tokens"] - r["cache_write_tokens"]
    units = (plain * 0.5 + r["cache_read_tokens"] * 0.05 + r["cache_write_tokens"] * 0.625
             + r["completion_tokens"] * 2.0) / 1000
    return math.ceil(units * 1e6 - 1e-6) / 1e6


@settings(max_examples=25, deadline=None)
@given(calls)
def test_no_shape_reserves_below_what_an_honest_upstream_bills(tmp_path_factory, schedule):
    tmp = tmp_path_factory.mktemp("bound")
    script = [Reply("done now " + c["text"], cache_read=c["cache_read"],
                    cache_write=c["cache_write"] if c["shape"] == "messages" else 0,
                    reasoning=c["reasoning"] if c["shape"] == "responses" else 0)
              for c in schedule]
    with fake_upstream(script) as up:
        last: dict = {}
        out = run_calls(tmp, up.base_url, lambda s: [_send(s, c, last) for c in schedule],
                        ceiling=1000.0, budget=1000.0, max_tokens=64, **PRICES)
    recs = out.calls()
    assert len(recs) == len(schedule)
    for r, c in zip(recs, schedule, strict=True):
        assert not r["refused"], r
        assert r["usage"] == "reported", (r, c)  # believed: within every bound
        assert r["prompt_bound"] >= r["prompt_tokens"]
        assert r["charged"] == _price(r) <= r["reserved"]
        event(f"{c['shape']}{' stream' if c['stream'] else ''}")
    out.verify()
