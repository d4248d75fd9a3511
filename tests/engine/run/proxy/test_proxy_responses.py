"""The proxy in the OpenAI Responses API (what Codex CLI speaks), against a scripted fake
upstream (tests/support/fake_apis.py): max_output_tokens set when absent and capped; settled from the
answer's usage (cached input at its price, reasoning as output); refused as a 429
`insufficient_quota` (Codex stops at once on it); cut, failed and broken streams charged their
reservation; a stored response chained within the attempt carries its context into the bound;
what bytes cannot bound refused before any reserve; every ledger verifies."""

from __future__ import annotations

import json
import math
from pathlib import Path

from experiments.crash.observables import prefix_excess
from loopproof.engine.run.proxy.responses import HIDDEN_TOKENS
from tests.support.fake_apis import fake_upstream
from tests.support.fake_openai import Reply
from tests.support.proxy_helpers import UPSTREAM_KEY, no_token_upstream, run_calls

PRICES = {"price_prompt_per_1k": 1.0, "price_completion_per_1k": 2.0,
          "price_cache_read_per_1k": 0.25}
TOOL = {"name": "exec_command", "input": {"cmd": "python -m pytest -q"}}


def _events(data: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in data.splitlines() if line.startswith(b"data: ")]


def _up(units: float) -> float:
    return math.ceil(units * 1e6 - 1e-6) / 1e6


def test_max_output_tokens_is_set_and_capped_and_usage_settles_cached_and_reasoning(
        tmp_path: Path):
    script = [Reply("one two three", cache_read=9, reasoning=5),
              Reply("four five", cache_read=0, reasoning=2, tool=TOOL)]
    with fake_upstream(script) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.responses("hi"), s.responses("go on", stream=True, max_output_tokens=128000),
            s.token], **PRICES)
        sent = list(up.requests)
        no_token_upstream(up, out.value[2])
    (st1, _, whole), (st2, _, streamed), _ = out.value
    assert st1 == st2 == 200
    assert json.loads(whole)["output"][-1]["content"][0]["text"] == "one two three"
    kinds = [e["type"] for e in _events(streamed)]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    for r in sent:
        assert r["path"] == "/v1/responses"
        assert r["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
        assert "x-api-key" not in r["headers"]
        assert r["body"]["max_output_tokens"] == 64  # none asked, then 128000: the node's
    pieces = math.ceil(len(json.dumps(TOOL["input"])) / 4)
    for call, r, (cached, output) in zip(out.calls(), sent,
                                         ((9, 5 + 3), (0, 2 + 2 + pieces)), strict=True):
        reserve, settle = [x for x in out.of_call(call["call"]) if x["type"] != "llm_call"]
        assert call["prompt_bound"] == r["bytes"] + HIDDEN_TOKENS
        assert reserve["amount"] == call["reserved"] == _up(
            (call["prompt_bound"] * 1.0 + 64 * 2.0) / 1000)
        assert call["usage"] == "reported" and call["cache_read_tokens"] == cached
        assert call["completion_tokens"] == output  # reasoning counted as output
        plain = call["prompt_tokens"] - cached
        assert settle["amount"] == call["charged"] == _up(
            (plain * 1.0 + cached * 0.25 + output * 2.0) / 1000)
    out.verify()


def test_a_call_that_does_not_fit_is_a_429_insufficient_quota_without_retry_after(
        tmp_path: Path):
    with fake_upstream([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: s.responses("x" * 4000, stream=True),
                        ceiling=3.0, budget=3.0)
        assert up.requests == []
    status, headers, data = out.value
    assert status == 429 and "retry-after" not in headers
    assert headers["x-should-retry"] == "false"
    err = json.loads(data)["error"]
    assert err["code"] == "insufficient_quota" and err["type"] == "insufficient_quota"
    (call,) = out.calls()
    assert call["refused"] and call["status"] == 429 and call["charged"] == 0.0
    out.verify()


def test_a_stream_past_max_output_tokens_is_cut_with_response_incomplete(tmp_path: Path):
    with fake_upstream([Reply("w " * 7 + "w", extra_tokens=50)]) as up:
        out = run_calls(tmp_path, up.base_url,
                        lambda s: s.responses("q", stream=True, max_output_tokens=8),
                        max_tokens=8)
    status, _, data = out.value
    events = _events(data)
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert status == 200 and len(deltas) == 8
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"]["reason"] == "max_output_tokens"
    assert events[-1]["response"]["id"] == events[0]["response"]["id"]
    (call,) = out.calls()
    assert call["cut"] is True and call["charged"] == call["reserved"]
    out.verify()


def test_failed_broken_and_lying_answers_are_charged_the_reservation(tmp_path: Path):
    script = [Reply("a b c d", fail_stream=True), Reply("a b c d", break_stream=True),
              Reply("a b c", usage="low"), Reply("a b", usage="string"),
              Reply("a b", usage="missing"),
              Reply("a b", usage={"input_tokens": 5, "output_tokens": 2,
                                  "output_tokens_details": {"reasoning_tokens": 3}}),
              Reply("a b", usage={"input_tokens": 5, "output_tokens": 2,
                                  "input_tokens_details": {"cached_tokens": 6}}),
              Reply(status=500)]
    with fake_upstream(script) as up:
        def body(s):
            return [s.responses("q", stream=True)[0] for _ in range(3)] + [
                s.responses("q")[0] for _ in range(5)]
        out = run_calls(tmp_path, up.base_url, body, ceiling=30.0, budget=30.0)
    assert out.value == [200] * 7 + [500]
    # response.failed mid-way; broke off; 3 deltas claiming 1 output token; strings; none;
    # more reasoning than output; more cached than input; a server error
    assert [c["usage"] for c in out.calls()] == ["missing", "missing", "implausible",
                                                 "implausible", "missing", "implausible",
                                                 "implausible", "missing"]
    for c in out.calls():
        assert c["charged"] == c["reserved"] > 0
    assert prefix_excess(out.records) <= 1e-9
    out.verify()


def test_a_stored_response_chained_to_carries_its_context_into_the_bound(tmp_path: Path):
    script = [Reply("first answer here"), Reply("second"), Reply("third")]
    with fake_upstream(script) as up:
        def body(s):
            first = json.loads(s.responses("start", max_output_tokens=16)[2])
            second = s.responses("more", stream=True, previous_response_id=first["id"])
            kept = json.loads(s.responses("apart", store=False)[2])
            return [second[0], s.responses("x", previous_response_id=kept["id"]),
                    s.responses("x", previous_response_id="resp_elsewhere")]
        out = run_calls(tmp_path, up.base_url, body, **PRICES)
        sent = list(up.requests)
    second, (st_kept, _, kept), (st_gone, _, gone) = out.value
    assert second == 200 and st_kept == st_gone == 400
    assert json.loads(kept)["error"]["param"] == "previous_response_id"
    assert len(sent) == 3  # the two refused chains never left
    c1, c2, c3, c4, c5 = out.calls()
    context = c1["prompt_tokens"] + c1["completion_tokens"]  # what the upstream prepends
    assert c2["prompt_bound"] == sent[1]["bytes"] + HIDDEN_TOKENS + context
    assert c2["usage"] == "reported" and c2["prompt_tokens"] > context
    assert c4["refused"] and c5["refused"] and not c3["refused"]
    out.verify()


def test_what_bytes_cannot_bound_is_refused_before_any_reserve(tmp_path: Path):
    image = [{"role": "user", "content": [{"type": "input_text", "text": "what is this"},
                                          {"type": "input_image", "image_url": "http://x/y"}]}]
    with fake_upstream([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.responses(image), s.responses("q", tools=[{"type": "web_search"}]),
            s.responses("q", tools=[{"type": "namespace", "name": "n",
                                     "tools": [{"type": "file_search"}]}]),
            s.responses("q", background=True), s.responses("q", conversation="conv_1"),
            s.responses([{"type": "item_reference", "id": "msg_1"}]),
            s.responses("q", context_management=[{"type": "compaction",
                                                  "compact_threshold": 1000}]),
            s.responses("q", max_output_tokens=0),
            s.responses([{"type": "additional_tools", "role": "developer",
                          "tools": [{"type": "web_search"}]}, {"role": "user", "content": "q"}])])
        assert up.requests == []
    for status, _, data in out.value:
        assert status == 400 and json.loads(data)["error"]["type"] == "invalid_request_error"
    assert not [r for r in out.records if r["type"] == "reserve" and r.get("what") == "llm"]
    out.verify()


def test_codex_shaped_input_is_accepted(tmp_path: Path):
    """What Codex sends: instructions, a developer and a user message, a reasoning item with
    encrypted content, function calls and their outputs, custom tools, store false."""
    items = [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "sandbox: danger-full-access"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                         "text": "fix calc.py"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB" + "x" * 200},
        {"type": "function_call", "name": "exec_command", "call_id": "c1",
         "arguments": "{\"cmd\": \"cat calc.py\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "def add(a, b): ..."},
        {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c2",
         "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"},
        # Codex 0.171.0's default models ("code mode") send their tools as an input item
        {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": [
            {"type": "namespace", "name": "functions", "description": "", "tools": [
                {"type": "custom", "name": "exec", "description": "Run JavaScript code",
                 "format": {"type": "text"}}]}]}]
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
             {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
             {"type": "namespace", "name": "agents", "description": "sub-agents",
              "tools": [{"type": "function", "name": "spawn_agent",
                         "parameters": {"type": "object"}}]}]
    with fake_upstream([Reply("done")]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: s.responses(
            items, instructions="You are Codex.", tools=tools, stream=True, store=False,
            include=["reasoning.encrypted_content"], reasoning={"effort": "low"},
            tool_choice="auto", parallel_tool_calls=False, prompt_cache_key="abc"))
        assert len(up.requests) == 1
    assert out.value[0] == 200
    (call,) = out.calls()
    assert call["usage"] == "reported" and call["charged"] < call["reserved"]
