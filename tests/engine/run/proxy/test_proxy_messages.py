"""The proxy in the Anthropic Messages API (what Claude Code speaks), against a scripted fake
upstream (tests/support/fake_apis.py): every call reserved before it leaves with max_tokens capped,
settled from message_start + message_delta with each kind of token at its price, refused in
Anthropic's own error shape, cut and broken streams charged their reservation, the key sent only
as x-api-key and the worker's token never; every ledger verifies and every body is stored."""

from __future__ import annotations

import json
import math
from pathlib import Path

from experiments.crash.observables import prefix_excess
from loopproof.engine.run.proxy.messages import HIDDEN_TOKENS, HIDDEN_TOKENS_PER_TOOL
from tests.support.fake_apis import fake_upstream
from tests.support.fake_openai import Reply
from tests.support.proxy_helpers import UPSTREAM_KEY, no_token_upstream, run_calls

PRICES = {"price_prompt_per_1k": 1.0, "price_completion_per_1k": 2.0,
          "price_cache_read_per_1k": 0.1, "price_cache_write_per_1k": 1.25}
TOOL = {"name": "Write", "input": {"file_path": "calc.py", "content": "def add(a, b):\n"}}


def _events(data: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in data.splitlines() if line.startswith(b"data: ")]


def _price(prompt: int, cache_read: int, cache_write: int, output: int) -> float:
    """What a call costs at PRICES, worked out here, not by the proxy's code."""
    units = (prompt * 1.0 + cache_read * 0.1 + cache_write * 1.25 + output * 2.0) / 1000
    return math.ceil(units * 1e6 - 1e-6) / 1e6


def test_a_call_is_capped_forwarded_with_x_api_key_and_settled_with_its_cache_tokens(
        tmp_path: Path):
    script = [Reply("one two three", cache_read=7, cache_write=5),
              Reply("four five", cache_read=3, cache_write=0, tool=TOOL)]
    with fake_upstream(script) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.messages("hi"), s.messages("go on", stream=True), s.token], **PRICES)
        sent = list(up.requests)
        no_token_upstream(up, out.value[2])
    (st1, head1, whole), (st2, _, streamed), _ = out.value
    assert st1 == st2 == 200
    assert json.loads(whole)["content"][0]["text"] == "one two three"
    kinds = [e["type"] for e in _events(streamed)]
    pieces = math.ceil(len(json.dumps(TOOL["input"])) / 4)  # the fake's input_json_deltas
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_delta") == 2 + pieces
    for r in sent:
        assert r["path"] == "/v1/messages?beta=true"
        assert r["headers"]["x-api-key"] == UPSTREAM_KEY and "authorization" not in r["headers"]
        assert r["headers"]["anthropic-version"] == "2023-06-01"
        assert r["headers"]["anthropic-beta"] == "claude-code-20250219,fake-beta"
        assert r["body"]["max_tokens"] == 64  # asked 128000: capped at the node's
    c1, c2 = out.calls()
    for call, r, (read, write, output) in ((c1, sent[0], (7, 5, 3)),
                                           (c2, sent[1], (3, 0, 2 + pieces))):
        reserve, settle = [x for x in out.of_call(call["call"]) if x["type"] != "llm_call"]
        prompt_bound = r["bytes"] + HIDDEN_TOKENS
        assert call["prompt_bound"] == prompt_bound
        # every prompt token may be a cache write, the dearest: the bound prices it so
        assert reserve["amount"] == call["reserved"] == math.ceil(
            (prompt_bound * 1.25 + 64 * 2.0) / 1000 * 1e6 - 1e-6) / 1e6
        assert call["usage"] == "reported" and call["endpoint"] == "/v1/messages"
        assert (call["cache_read_tokens"], call["cache_write_tokens"]) == (read, write)
        assert call["completion_tokens"] == output
        plain = call["prompt_tokens"] - read - write
        assert settle["amount"] == call["charged"] == _price(plain, read, write, output)
        assert 0 < call["charged"] < call["reserved"]
    assert c2["stream"] is True and not c2["cut"]
    out.verify()


def test_a_call_that_does_not_fit_is_a_402_billing_error_that_says_do_not_retry(
        tmp_path: Path):
    with fake_upstream([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: s.messages("x" * 4000),
                        ceiling=3.0, budget=3.0)
        assert up.requests == []  # the refused call never left
    status, headers, data = out.value
    assert status == 402 and headers["x-should-retry"] == "false"
    doc = json.loads(data)
    assert doc["type"] == "error" and doc["error"]["type"] == "billing_error"
    assert "may spend" in doc["error"]["message"]
    (call,) = out.calls()
    assert call["refused"] and call["status"] == 402 and call["charged"] == 0.0
    assert not [r for r in out.records if r.get("what") == "llm"]
    out.verify()


def test_a_stream_past_max_tokens_is_cut_closed_as_anthropic_closes_one_and_charged_in_full(
        tmp_path: Path):
    with fake_upstream([Reply("w " * 7 + "w", extra_tokens=50)]) as up:
        out = run_calls(tmp_path, up.base_url,
                        lambda s: s.messages("q", stream=True, max_tokens=8), max_tokens=8)
    status, _, data = out.value
    events = _events(data)
    texts = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert status == 200 and len(texts) == 8  # exactly the reserved completion tokens
    assert [e["type"] for e in events[-3:]] == ["content_block_stop", "message_delta",
                                                "message_stop"]
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"
    (call,) = out.calls()
    assert call["cut"] is True and call["charged"] == call["reserved"]
    out.verify()


def test_broken_failed_and_lying_streams_and_answers_are_charged_the_reservation(
        tmp_path: Path):
    script = [Reply("a b c d", break_stream=True), Reply("a b c d", fail_stream=True),
              Reply("a b c", usage="low"), Reply("a b", usage="string"),
              Reply("a b", usage="missing"),
              Reply("a b", usage={"input_tokens": 10**6, "output_tokens": 2}),
              Reply("a b", usage={"input_tokens": 5, "output_tokens": 65}),
              Reply("a b", usage={"input_tokens": 5, "output_tokens": 2,
                                  "cache_read_input_tokens": -1}),
              Reply(status=529)]
    with fake_upstream(script) as up:
        def body(s):
            return [s.messages("q", stream=True)[0] for _ in range(3)] + [
                s.messages("q")[0] for _ in range(6)]
        out = run_calls(tmp_path, up.base_url, body, ceiling=30.0, budget=30.0)
    assert out.value == [200] * 8 + [529]
    calls = out.calls()
    # broke off; an error event mid-way; a stream of 3 deltas claiming 1 output token;
    # strings; none; a prompt past the bound; output past max_tokens; a negative; an
    # overloaded upstream (it may have billed)
    assert [c["usage"] for c in calls] == ["missing", "missing", "implausible", "implausible",
                                          "missing", "implausible", "implausible",
                                          "implausible", "missing"]
    for c in calls:
        assert c["charged"] == c["reserved"] > 0
    assert prefix_excess(out.records) <= 1e-9
    out.verify()


def test_count_tokens_is_free_forwarded_with_the_key_and_recorded(tmp_path: Path):
    with fake_upstream([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [s.send(
            "/v1/messages/count_tokens?beta=true",
            {"model": "claude-fake", "messages": [{"role": "user", "content": "count me"}]},
            {"x-api-key": s.token, "anthropic-version": "2023-06-01"}), s.token])
        (sent,) = up.requests
        no_token_upstream(up, out.value[1])
    status, _, data = out.value[0]
    assert status == 200 and json.loads(data)["input_tokens"] > 0
    assert sent["path"] == "/v1/messages/count_tokens?beta=true"
    assert sent["headers"]["x-api-key"] == UPSTREAM_KEY
    (call,) = out.calls()
    assert call["reserved"] == call["charged"] == 0.0 and call["status"] == 200
    assert not [r for r in out.records if r.get("what") == "llm"]
    out.verify()


def test_what_bytes_cannot_bound_is_refused_in_anthropics_shape_before_any_reserve(
        tmp_path: Path):
    image = [{"type": "text", "text": "what is this"},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                          "data": "iVBORw0KGgo="}}]
    in_result = [{"type": "tool_result", "tool_use_id": "t1",
                  "content": [{"type": "document", "source": {"type": "url",
                                                              "url": "http://x/y.pdf"}}]}]
    web = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]
    compact = {"edits": [{"type": "compact_20260112"}]}
    with fake_upstream([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.messages(image), s.messages(in_result), s.messages("q", tools=web),
            s.messages("q", mcp_servers=[{"type": "url", "url": "http://x", "name": "x"}]),
            s.messages("q", context_management=compact),
            s.send("/v1/messages", b"not json", {"x-api-key": s.token})])
        assert up.requests == []
    for status, _, data in out.value:
        doc = json.loads(data)
        assert status == 400 and doc["type"] == "error"
        assert doc["error"]["type"] == "invalid_request_error"
    assert not [r for r in out.records if r["type"] == "reserve" and r.get("what") == "llm"]
    assert [c["status"] for c in out.calls()] == [400] * 6
    out.verify()


def test_the_token_is_taken_as_x_api_key_or_bearer_and_a_wrong_one_is_a_401(tmp_path: Path):
    with fake_upstream([Reply("ok"), Reply("ok")]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.messages("q", token="sk-ant-guess"),
            s.send("/v1/messages", {"model": "m", "messages": [
                {"role": "user", "content": "q"}]}, {"Authorization": f"Bearer {s.token}"}),
            s.messages("q"), s.send("/v1/files", b"{}", {"x-api-key": s.token,
                                                           "anthropic-version": "2023-06-01"})])
        assert len(up.requests) == 2
    (bad, _, body), (ok1, _, _), (ok2, _, _), (lost, _, gone) = out.value
    assert (bad, ok1, ok2, lost) == (401, 200, 200, 404)
    assert json.loads(body)["error"]["type"] == "authentication_error"
    assert json.loads(gone)["error"]["type"] == "not_found_error"


def test_a_thinking_budget_above_the_cap_is_lowered_below_it(tmp_path: Path):
    with fake_upstream([Reply("ok"), Reply("ok")]) as up:
        run_calls(tmp_path, up.base_url, lambda s: [
            s.messages("q", thinking={"type": "enabled", "budget_tokens": 31999}),
            s.messages("q", max_tokens=50, thinking={"type": "enabled", "budget_tokens": 20})])
        asked = [r["body"] for r in up.requests]
    assert asked[0]["max_tokens"] == 64 and asked[0]["thinking"]["budget_tokens"] == 63
    assert asked[1]["max_tokens"] == 50 and asked[1]["thinking"]["budget_tokens"] == 20


def test_typed_client_tools_add_their_hidden_prompt_to_the_bound(tmp_path: Path):
    tools = [{"type": "bash_20250124", "name": "bash"},
             {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
             {"name": "Write", "input_schema": {"type": "object"}}]
    with fake_upstream([Reply("ok")]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: s.messages("q", tools=tools))
        (sent,) = up.requests
    (call,) = out.calls()
    assert call["prompt_bound"] == sent["bytes"] + HIDDEN_TOKENS + 2 * HIDDEN_TOKENS_PER_TOOL
    assert call["usage"] == "reported"  # the fake adds 530 + 735 x 2: within the bound


def test_under_end_attempt_the_first_refusal_ends_the_attempt_in_anthropics_shape(
        tmp_path: Path):
    """on_refusal = "end-attempt": the first refusal records why the worker stops and every
    later call is refused at once, each in Anthropic's shape (Claude Code stops at the first;
    a worker that retries gets the same answer without a reserve)."""
    with fake_upstream([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [s.messages("x" * 4000),
                                                          s.messages("small")],
                        ceiling=3.0, budget=3.0, on_refusal="end-attempt")
        assert up.requests == []
    for status, headers, data in out.value:
        doc = json.loads(data)
        assert status == 402 and doc["error"]["type"] == "billing_error"
        assert headers["x-should-retry"] == "false"
    assert "the attempt ends here" in json.loads(out.value[1][2])["error"]["message"]
    (stop,) = [r for r in out.records if r["type"] == "worker_stopped"]
    first, second = out.calls()
    assert stop["call"] == first["call"] and stop["cost"] == first["reserved"] > stop["left"]
    assert second["why"] == "the attempt is ending: a call was refused"
    out.verify()  # replay checks the worker_stopped record against the state
