"""The metered proxy attacked by its upstream: every byte of every answer, streamed or not, is the
attacker's (tests/support/hostile_upstream.py). Its goals: a call settled below what it would
bill, a usage the proxy believes that hides tokens it sent, the upstream key in the worker's
hands, a call that never ends, a proxy that swallows memory without bound. Each test reads the
ledger file the engine wrote: settled + reserved <= B at every prefix (G3), and each call's
charge at least what the upstream would bill for what it sent.

What the upstream "would bill" here: the most it ever reported (a count reported twice, the
larger), and at least one token for every 64 content bytes it sent (no token of a BPE
vocabulary is longer; docs/proxy.md).
"""

from __future__ import annotations

import gzip
import json
import math
import time
from pathlib import Path

from experiments.crash.observables import prefix_excess
from loopproof.engine.run.proxy import call as call_mod
from loopproof.engine.run.proxy import tokens as tokens_mod
from loopproof.engine.run.proxy.store import calls_root
from tests.support.fake_apis import fake_upstream
from tests.support.fake_openai import Reply
from tests.support.hostile_upstream import (
    DONE,
    MESSAGE_STOP,
    chat_chunk,
    drip,
    event,
    flood,
    hostile_upstream,
    message_delta,
    message_start,
    response_doc,
    response_event,
    stream,
    text_block,
    whole,
)
from tests.support.proxy_helpers import UPSTREAM_KEY, Session, run_calls

Q = "q" * 300  # a prompt whose byte bound leaves room for the counts the attacks report


def cost(prompt: int = 0, output: int = 0) -> float:
    """What `prompt` plain prompt tokens and `output` output tokens cost at run_calls' prices
    (1 and 2 spend units per 1,000), rounded up to the meter's 1e-6."""
    return math.ceil((prompt * 1.0 + output * 2.0) / 1000 * 1e6 - 1e-6) / 1e6


def in_full(call: dict) -> bool:
    """The call was charged its whole reservation. The meter settles min(used, open) and the
    open holds are a float sum (engine/run/meter.py): when a settle and the next reserve
    overlap, the whole hold can come back 1 ulp under `reserved`, never above it."""
    return call["reserved"] - 1e-9 <= call["charged"] <= call["reserved"]


def _checked(out) -> list[dict]:
    assert prefix_excess(out.records) <= 1e-9  # G3, from the ledger file's records
    out.verify()
    calls = out.calls()
    for c in calls:
        assert c["charged"] <= c["reserved"] + 1e-9
    return calls


def _chat(s: Session, **more) -> tuple[int, bytes]:
    return s.chat(Q, **more)


def test_a_usage_that_shrinks_or_comes_after_the_end_is_not_believed(tmp_path: Path):
    """Cumulative counts never fall, and nothing follows a stream's end: an upstream that
    reports 900 prompt tokens, then 3 (in a message_delta, or in a second message_start); or
    ends, then reports 60 output tokens; or sends a second usage chunk lower than the first, is
    charged its reservation (never what it reported last)."""
    answers = [
        stream([message_start({"input_tokens": 900, "output_tokens": 1}), *text_block("a", "b"),
                message_delta({"input_tokens": 3, "output_tokens": 2}), MESSAGE_STOP]),
        stream([message_start({"input_tokens": 10, "output_tokens": 1}), *text_block("a", "b"),
                message_delta({"output_tokens": 2}), MESSAGE_STOP,
                message_delta({"output_tokens": 60})]),
        stream([message_start({"input_tokens": 900, "output_tokens": 1}), *text_block("a", "b"),
                message_start({"input_tokens": 3, "output_tokens": 1}),
                message_delta({"output_tokens": 2}), MESSAGE_STOP]),
        stream([chat_chunk("a"), chat_chunk("b"),
                chat_chunk(usage={"prompt_tokens": 300, "completion_tokens": 2}),
                chat_chunk(usage={"prompt_tokens": 1, "completion_tokens": 2}), DONE]),
        stream([response_event("response.output_text.delta", delta="a"),
                response_event("response.completed", response=response_doc(
                    {"input_tokens": 10, "output_tokens": 1})),
                response_event("response.completed", response=response_doc(
                    {"input_tokens": 10, "output_tokens": 60}))]),
    ]
    bills = [cost(900, 2), cost(10, 60), cost(900, 2), cost(300, 2), cost(10, 60)]
    with hostile_upstream(answers) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.messages(Q, stream=True)[0], s.messages(Q, stream=True)[0],
            s.messages(Q, stream=True)[0], _chat(s, stream=True)[0],
            s.responses(Q, stream=True, store=False)[0]], ceiling=100.0, budget=100.0)
    assert out.value == [200] * 5
    for c, bill in zip(_checked(out), bills, strict=True):
        assert c["usage"] == "implausible", c
        assert in_full(c) and c["reserved"] >= bill, (c, bill)


def test_content_packed_under_a_low_usage_is_charged_at_least_a_token_per_64_bytes(
        tmp_path: Path):
    """An upstream that sends 3,000 bytes of text and says it was one token (in one streamed
    delta, in a whole answer, or in a streamed Responses item that no delta carried), or streams
    ten reasoning deltas and says one: the usage is below what it sent, so it is not
    believed."""
    text = "w" * 3000
    floor = math.ceil(len(text) / 64)
    message = {"id": "msg_h", "type": "message", "role": "assistant", "model": "claude-fake",
               "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 10, "output_tokens": 1}}
    chat = {"id": "c", "object": "chat.completion", "model": "fake-model", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text},
         "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 1}}
    answers = [
        whole(200, json.dumps(message).encode()),
        stream([message_start({"input_tokens": 10, "output_tokens": 1}), *text_block(text),
                message_delta({"output_tokens": 1}), MESSAGE_STOP]),
        whole(200, json.dumps(chat).encode()),
        whole(200, json.dumps(response_doc({"input_tokens": 10, "output_tokens": 1},
                                           text)).encode()),
        stream([response_event("response.output_item.done", output_index=0,
                               item=response_doc(None, text)["output"][0]),
                response_event("response.completed", response=response_doc(
                    {"input_tokens": 10, "output_tokens": 1}, text))]),
        stream([*[chat_chunk(reasoning="r") for _ in range(10)],
                chat_chunk(usage={"prompt_tokens": 10, "completion_tokens": 1}), DONE]),
        stream([response_event("response.output_text.delta", output_index=0, delta="ok"),
                response_event("response.output_item.done", output_index=0,
                               item=response_doc(None, "ok")["output"][0]),
                response_event("response.completed", response=response_doc(
                    {"input_tokens": 10, "output_tokens": 1}, "ok"))]),  # honest: believed
    ]
    bills = [cost(10, floor)] * 5 + [cost(10, 10)]
    with hostile_upstream(answers) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.messages(Q)[0], s.messages(Q, stream=True)[0], _chat(s)[0],
            s.responses(Q, store=False)[0], s.responses(Q, stream=True, store=False)[0],
            _chat(s, stream=True)[0], s.responses(Q, stream=True, store=False)[0]],
                        ceiling=100.0, budget=100.0)
    assert out.value == [200] * 7
    *lying, honest = _checked(out)
    for c, bill in zip(lying, bills, strict=True):
        assert c["usage"] == "implausible", c
        assert in_full(c) and c["reserved"] >= bill, (c, bill)
    assert honest["usage"] == "reported" and honest["charged"] < honest["reserved"], honest


def test_the_upstream_key_echoed_back_never_reaches_the_worker(tmp_path: Path):
    """A buggy upstream that echoes the key it was sent (in an error, in a streamed delta, in
    count_tokens' answer): the worker gets `[redacted]` in its place."""
    err = {"type": "error", "error": {"type": "authentication_error",
                                      "message": f"invalid x-api-key {UPSTREAM_KEY}"}}
    answers = [
        whole(401, json.dumps(err).encode()),
        stream([message_start({"input_tokens": 10, "output_tokens": 1}),
                *text_block("your key is ", UPSTREAM_KEY),
                message_delta({"output_tokens": 2}), MESSAGE_STOP]),
        whole(200, json.dumps({"input_tokens": 5, "echo": UPSTREAM_KEY}).encode()),
        whole(200, json.dumps(response_doc({"input_tokens": 10, "output_tokens": 3},
                                           UPSTREAM_KEY)).encode()),
    ]
    with hostile_upstream(answers) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.messages("q"), s.messages("q", stream=True),
            s.send("/v1/messages/count_tokens", {"model": "m", "messages": []},
                   {"x-api-key": s.token}),
            s.responses("q", store=False)])
    for status, _, data in out.value:
        assert UPSTREAM_KEY.encode() not in data
        assert b"[redacted]" in data, (status, data)
    _checked(out)
    for p in calls_root(out.ledger).iterdir():
        assert UPSTREAM_KEY.encode() not in p.read_bytes()


def test_an_upstream_that_drips_forever_is_cut_at_the_calls_timeout(tmp_path: Path):
    """`timeout_s` is the wall clock of one upstream call: an upstream that keeps the stream
    alive with a ping every 0.2 s (each read is quick, so a per-read timeout never fires), or
    sends a whole answer's body a byte at a time, is hung up on at the deadline and the call
    charged its reservation."""
    ping = event("ping", {"type": "ping"})

    answers = [stream([message_start({"input_tokens": 10, "output_tokens": 1})],
                      then=drip(ping, 0.2, 40.0)), _trickle]
    with hostile_upstream(answers) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.messages("q", stream=True)[0], s.messages("q")[0]], timeout_s=1.0)
    for c in _checked(out):
        assert c["latency_s"] < 20.0, c  # the deadline (1 s), far from the drip's 40 s
        assert in_full(c) and c["usage"] != "reported", c


def test_an_endless_or_huge_stream_is_cut_at_the_proxys_byte_cap(tmp_path: Path, monkeypatch):
    """Events that carry no content (pings) or one line that never ends are not tokens, so the
    content cut never fires; the proxy still keeps (and stores) at most MAX_STREAM bytes of a
    stream, then cuts it and charges the reservation."""
    cap = 256 * 1024
    monkeypatch.setattr(call_mod, "MAX_STREAM", cap, raising=False)
    ping = event("ping", {"type": "ping"})
    answers = [stream([message_start({"input_tokens": 10, "output_tokens": 1})],
                      then=flood(ping, 4 * cap)),
               stream([b"data: "], then=flood(b"x" * 4096, 4 * cap))]
    with hostile_upstream(answers) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            len(s.messages("q", stream=True)[2]), len(_chat(s, stream=True)[1])])
    assert all(n <= cap + 4096 for n in out.value), out.value
    for c in _checked(out):
        assert c["cut"] and c["charged"] == c["reserved"], c
        stored = calls_root(out.ledger) / c["response_sha256"]
        assert stored.stat().st_size <= cap + (1 << 20), c  # at most one line past the cap


def test_answers_that_are_not_the_apis_are_charged_their_reservation(tmp_path: Path):
    """Held before this file: a 200 that is not JSON, gzip the proxy did not ask for, HTML, a
    200 carrying an error, a `response.failed` carrying a usage, a usage in an event that
    carries none, cache tokens above the prompt bound, a negative count."""
    failed = response_doc({"input_tokens": 1, "output_tokens": 1}, status="failed")
    answers = [
        whole(200, b"<html>rate limited</html>", "text/html"),
        whole(200, gzip.compress(json.dumps(response_doc({"input_tokens": 1,
                                                          "output_tokens": 1})).encode()),
              headers=(("Content-Encoding", "gzip"),)),
        whole(200, b"not json at all"),
        whole(200, json.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                          "message": "busy"}}).encode()),
        stream([response_event("response.output_text.delta", delta="a"),
                response_event("response.failed", response=failed)]),
        stream([response_event("response.in_progress", response=response_doc(
            {"input_tokens": 1, "output_tokens": 1}, status="in_progress")),
            response_event("response.output_text.delta", delta="a"),
            response_event("response.completed", response=response_doc(None))]),
        stream([message_start({"input_tokens": 1, "output_tokens": 1,
                               "cache_read_input_tokens": 10**6}), *text_block("a"),
                message_delta({"output_tokens": 1}), MESSAGE_STOP]),
        whole(200, json.dumps({"id": "x", "type": "message", "content": [],
                               "usage": {"input_tokens": -5, "output_tokens": 1}}).encode()),
    ]
    with hostile_upstream(answers) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.responses("q", store=False)[0], s.responses("q", store=False)[0],
            _chat(s)[0], s.messages("q")[0],
            s.responses("q", stream=True, store=False)[0],
            s.responses("q", stream=True, store=False)[0],
            s.messages("q", stream=True)[0], s.messages("q")[0]], ceiling=100.0, budget=100.0)
    assert out.value == [200] * 8
    for c in _checked(out):
        assert c["usage"] in ("missing", "implausible"), c
        assert c["charged"] == c["reserved"] > 0, c


def test_a_tokenize_that_counts_low_is_not_asked_again_once_the_usage_exceeds_it(
        tmp_path: Path):
    """An upstream whose /tokenize counts below the usage it then reports (llama.cpp's counts
    raw text without the chat template): that call's usage is not believed (charged its
    reservation), and the attempt's later calls keep the byte bound, whose usage is believed."""
    with fake_upstream([Reply("ok"), Reply("ok")]) as up:
        up.tokenize = "text"  # the messages' words only: below the template's count
        out = run_calls(tmp_path, up.base_url, lambda s: [s.chat("a few words here")[0],
                                                          s.chat("a few words here")[0]])
    assert out.value == [200, 200]
    first, second = _checked(out)
    assert first["prompt_counted_by"] == "tokenize" and first["usage"] == "implausible"
    assert second["prompt_counted_by"] == "bytes" and second["usage"] == "reported", second
    assert len(up.counted) == 1  # asked once


def test_a_slow_upstream_does_not_outlive_its_deadline_even_before_headers(tmp_path: Path):
    """The deadline holds before the answer's status line too: an upstream that accepts the
    request and says nothing is hung up on at `timeout_s` (a per-read timeout would also do
    here; the call's deadline must not depend on it)."""
    def silent(h, body) -> None:
        h.pause(40.0)

    t0 = time.monotonic()
    with hostile_upstream([silent]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: s.messages("q")[0], timeout_s=1.0)
    assert time.monotonic() - t0 < 30.0
    (c,) = _checked(out)
    assert out.value == 502 and c["charged"] == c["reserved"], c


def _trickle(h, body) -> None:
    """A whole answer's body a byte every 0.2 s: each read is quick, the answer never done."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "1000")
    h.end_headers()
    drip(b" ", 0.2, 40.0)(h)


def test_a_free_call_or_a_token_count_that_drips_is_hung_up_on_at_its_deadline(
        tmp_path: Path, monkeypatch):
    """count_tokens (free) and vLLM's /tokenize are exchanges with the upstream too: one that
    drips is hung up on at its deadline (timeout_s; ASK_TIMEOUT_S), not at the drip's end: the
    worker has a 502 for the first, and the metered call after keeps the byte bound."""
    monkeypatch.setattr(tokens_mod, "ASK_TIMEOUT_S", 1.0)
    chat = {"id": "c", "object": "chat.completion", "model": "fake-model", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    t0 = time.monotonic()
    with hostile_upstream([_trickle, whole(200, json.dumps(chat).encode())]) as up:
        up.tokenize = _trickle
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.send("/v1/messages/count_tokens", {"model": "m", "messages": []},
                   {"x-api-key": s.token})[0], _chat(s)[0]], timeout_s=1.0)
    assert time.monotonic() - t0 < 20.0  # the deadlines (1 s each), far from the drip's 40 s
    assert out.value == [502, 200]
    free, metered = _checked(out)
    assert free["charged"] == 0.0 and free["status"] == 502, free
    assert metered["prompt_counted_by"] == "bytes" and metered["usage"] == "reported", metered


def test_a_prompt_reported_below_its_text_is_not_believed(tmp_path: Path):
    """An upstream that says a 6,400-byte prompt was one token (no token of a BPE vocabulary is
    longer than 64 bytes, so it was at least 100), in each API: not believed, charged the
    reservation; the same answer saying 100 is believed."""
    text = "p" * 6400
    floor = len(text) // 64

    def chat(prompt: int) -> bytes:
        return json.dumps({"id": "c", "object": "chat.completion", "model": "fake-model",
                           "choices": [{"index": 0, "message": {"role": "assistant",
                                                                "content": "ok"},
                                        "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": prompt, "completion_tokens": 1}}).encode()

    answers = [
        whole(200, chat(1)),
        stream([message_start({"input_tokens": 1, "output_tokens": 1}), *text_block("ok"),
                message_delta({"output_tokens": 1}), MESSAGE_STOP]),
        whole(200, json.dumps(response_doc({"input_tokens": 1, "output_tokens": 1})).encode()),
        whole(200, chat(floor)),
    ]
    with hostile_upstream(answers) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.chat(text)[0], s.messages(text, stream=True)[0],
            s.responses(text, store=False)[0], s.chat(text)[0]], ceiling=100.0, budget=100.0)
    assert out.value == [200] * 4
    *lying, honest = _checked(out)
    for c in lying:
        assert c["usage"] == "implausible", c
        assert c["charged"] == c["reserved"] >= cost(floor, 1), c
    assert honest["usage"] == "reported" and honest["charged"] == cost(floor, 1), honest
