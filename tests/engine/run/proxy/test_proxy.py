"""The model-call proxy against a fake upstream: every call reserves before it is forwarded, is
settled with a believable usage or charged its reservation, and is recorded; a call that does not
fit is a 402 and the attempt goes on."""

from __future__ import annotations

import hashlib
import json
import select
import socket
import threading
import time
from pathlib import Path

import pytest

from experiments.crash.observables import prefix_excess
from loopproof.engine.run.proxy import pricing
from loopproof.engine.run.proxy.config import parse
from loopproof.engine.run.proxy.shape import CHAT, COMPLETIONS, Asked
from loopproof.engine.run.proxy.shapes import SHAPES
from tests.support.fake_openai import QuietServer, Reply, fake_openai
from tests.support.proxy_helpers import UPSTREAM_KEY, run_calls


def _cfg(**more):
    table = {"upstream": "http://x/v1", "price_prompt_per_1k": 1.0,
             "price_completion_per_1k": 2.0, "max_tokens": 64, **more}
    return parse(table, lambda f, p, fix: ValueError(f))


def test_a_call_reserves_its_bound_before_it_leaves_and_settles_its_usage(tmp_path: Path):
    seen_in_ledger: list[bool] = []
    with fake_openai([Reply("one two three")]) as up:
        def check_ledger(body):  # the upstream sees the request: the reserve is on disk already
            text = (tmp_path / "run.jsonl").read_text()
            seen_in_ledger.append('"what":"llm"' in text.replace(" ", "")
                                  and '"type":"reserve"' in text.replace(" ", ""))
        up.on_request = check_ledger
        out = run_calls(tmp_path, up.base_url,
                        lambda s: s.chat("hi", max_tokens=500))
        sent = up.requests[0]
    assert seen_in_ledger == [True]
    assert out.exit == 0
    assert sent["auth"] == f"Bearer {UPSTREAM_KEY}"
    assert sent["body"]["max_tokens"] == 64  # capped at the node's max_tokens
    reserve, settle, call = out.of_call("c1")
    assert [reserve["type"], settle["type"], call["type"]] == ["reserve", "settle", "llm_call"]
    bound = pricing.cost(_cfg(), sent["bytes"], 64)
    assert reserve["amount"] == bound == call["reserved"]
    assert call["prompt_tokens"] == sent["bytes"] // 4 and call["completion_tokens"] == 3
    assert settle["amount"] == pricing.cost(_cfg(), sent["bytes"] // 4, 3) == call["charged"]
    assert settle["of"] == reserve["amount"] and call["usage"] == "reported"
    assert call["refused"] is False and call["status"] == 200 and not call["cut"]
    for digest in (call["request_sha256"], call["response_sha256"]):
        stored = (tmp_path / "run.jsonl.calls" / digest).read_bytes()
        assert hashlib.sha256(stored).hexdigest() == digest
    assert json.loads((tmp_path / "run.jsonl.calls" / call["request_sha256"])
                      .read_bytes())["max_tokens"] == 64


def test_a_call_that_does_not_fit_is_a_402_and_the_attempt_goes_on(tmp_path: Path):
    big = "x" * 4000  # 4000+ prompt bytes at 1 unit / 1k: a bound above the 3 units left
    with fake_openai([Reply("small")]) as up:
        def body(s):
            return [s.chat(big, max_tokens=64), s.chat("tiny", max_tokens=8)]
        out = run_calls(tmp_path, up.base_url, body, ceiling=3.0, budget=3.0)
        assert len(up.requests) == 1  # the refused call never left
    (status, data), (ok, _) = out.value
    assert status == 402 and ok == 200
    err = json.loads(data)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "insufficient_quota" and err["code"] == "budget_exceeded"
    refused, done = out.calls()
    assert refused["refused"] is True and refused["status"] == 402 and refused["charged"] == 0.0
    assert not [r for r in out.of_call("c1") if r["type"] in ("reserve", "settle", "overrun")]
    assert done["refused"] is False and out.exit == 0  # the attempt went on to its verdict
    assert prefix_excess(out.records) <= 1e-9


def test_a_stream_is_relayed_and_settled_with_its_usage_chunk(tmp_path: Path):
    with fake_openai([Reply("a b c d"), Reply("e f")]) as up:
        def body(s):
            return [s.chat("hi", stream=True, stream_options={"include_usage": True}),
                    s.chat("hi", stream=True)]
        out = run_calls(tmp_path, up.base_url, body)
        forwarded = [r["body"] for r in up.requests]
    (st1, with_usage), (st2, without) = out.value
    assert st1 == st2 == 200
    assert with_usage.rstrip().endswith(b"data: [DONE]") and b'"usage"' in with_usage
    assert b'"prompt_tokens"' not in without  # the client did not ask: not relayed to it ...
    assert all(f["stream_options"]["include_usage"] is True for f in forwarded)  # ... asked
    c1, c2 = out.calls()
    assert (c1["completion_tokens"], c2["completion_tokens"]) == (4, 2)
    assert c1["usage"] == c2["usage"] == "reported"
    assert c1["charged"] < c1["reserved"] and c2["charged"] < c2["reserved"]


def test_lying_or_missing_usage_is_charged_the_reservation(tmp_path: Path):
    script = [Reply("a b c", usage="low"), Reply("a b c", usage="high"),
              Reply("a b", usage="string"), Reply("a b", usage="missing"),
              Reply("a b c d", usage="low")]
    with fake_openai(script) as up:
        def body(s):
            return [s.chat("q", stream=True, stream_options={"include_usage": True}),
                    s.chat("q"), s.chat("q"), s.chat("q"), s.chat("q")]
        out = run_calls(tmp_path, up.base_url, body)
    calls = out.calls()
    # 1: a stream of 3 chunks claiming 1 token; 2: 10x the bound; 3: strings; 4: none;
    # 5: non-streamed "low" is believable (1 token of 4 words cannot be disproved): charged it
    assert [c["usage"] for c in calls] == ["implausible", "implausible", "implausible",
                                          "missing", "reported"]
    for c in calls[:4]:
        assert c["charged"] == c["reserved"] > 0
    assert calls[4]["charged"] < calls[4]["reserved"]


def test_a_stream_past_its_max_tokens_is_cut_and_charged_in_full(tmp_path: Path):
    with fake_openai([Reply("w " * 7 + "w", extra_tokens=50)]) as up:
        out = run_calls(tmp_path, up.base_url,
                        lambda s: s.chat("q", stream=True, max_tokens=8), max_tokens=8)
    status, data = out.value
    events = [e for e in data.split(b"\n\n") if e.startswith(b"data: {")]
    contents = [json.loads(e[6:])["choices"][0].get("delta", {}).get("content") for e in events]
    assert sum(1 for c in contents if c) == 8  # exactly the reserved completion tokens
    last = json.loads(events[-1][6:])
    assert last["choices"][0]["finish_reason"] == "length"
    assert data.rstrip().endswith(b"data: [DONE]")
    (call,) = out.calls()
    assert call["cut"] is True and call["charged"] == call["reserved"]


def test_more_tokens_than_asked_without_a_stream_is_charged_in_full(tmp_path: Path):
    with fake_openai([Reply("a b", extra_tokens=100)]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: s.chat("q", max_tokens=4))
    (call,) = out.calls()
    assert call["usage"] == "implausible" and call["charged"] == call["reserved"]


def test_an_erroring_upstream_is_relayed_and_charged_and_an_absent_one_is_free(tmp_path: Path):
    with fake_openai([Reply(status=500), Reply(status=429)]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [s.chat("q")[0], s.chat("q")[0]])
    assert out.value == [500, 429]
    assert all(c["charged"] == c["reserved"] for c in out.calls())  # no usage: the reservation
    (tmp_path / "gone").mkdir()
    gone = run_calls(tmp_path / "gone", "http://127.0.0.1:9/v1", lambda s: s.chat("q")[0])
    (call,) = gone.calls()
    assert gone.value == 502 and call["status"] == 0 and "error" in call
    assert call["charged"] == 0.0  # never connected: nothing was sent, nothing charged


def test_stopping_the_proxy_mid_call_charges_the_call_its_reservation(tmp_path: Path):
    result: dict = {}
    with fake_openai([Reply("slow", delay_s=3.0)]) as up:
        def body(s):
            def call():
                try:
                    result["r"] = s.chat("q")
                except OSError as exc:  # the proxy closed the connection: expected
                    result["r"] = repr(exc)
            t = threading.Thread(target=call)
            t.start()
            up.arrived.wait(5)
            t0 = time.monotonic()
            s.proxy.stop()  # the attempt ends while the call is in flight
            result["stop_s"] = time.monotonic() - t0
            t.join(5)
        out = run_calls(tmp_path, up.base_url, body)
    assert result["stop_s"] < 2.5  # stop aborts the call; it does not wait for the upstream
    (call,) = out.calls()
    assert call["charged"] == call["reserved"] > 0
    assert prefix_excess(out.records) <= 1e-9 and out.exit == 0


def test_the_token_is_required_and_only_three_endpoints_exist(tmp_path: Path):
    with fake_openai([]) as up:
        def body(s):
            ask = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            return [s.request("POST", "/v1/chat/completions", ask, token="sk-guess")[0],
                    s.request("POST", "/v1/files", b"{}")[0],
                    s.request("POST", "/v1/embeddings", b"{}")[0],
                    s.request("GET", "/v1/models")[0],
                    s.request("GET", "/v1/models", token="")[0]]
        out = run_calls(tmp_path, up.base_url, body)
        paths = [r["path"] for r in up.requests]
    assert out.value == [401, 404, 404, 200, 401]
    assert paths == ["/v1/models"]  # nothing else reached the upstream


def _headers_then_body(s, path: str, token: str) -> str:
    """A client that sends its headers, then its body a moment later (as http.client does, in
    two sends): the status it reads, or what went wrong."""
    body = b'{"model": "m", "messages": []}'
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(s.socket)
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())
        if select.select([sock], [], [], 1.0)[0]:
            return "answered before the body was sent"
        try:
            sock.sendall(body)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        except OSError as exc:
            return repr(exc)
    return data.split(b" ", 2)[1].decode()


def test_a_refused_request_is_read_whole_before_the_answer(tmp_path: Path):
    """Answering 401/404 before the body arrives, then closing, broke the client's send of its
    body (BrokenPipe) instead of showing it the refusal: the proxy reads the body first."""
    with fake_openai([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            _headers_then_body(s, "/v1/chat/completions", "sk-guess"),
            _headers_then_body(s, "/v1/files", s.token)])
        assert up.requests == []
    assert out.value == ["401", "404"]


def test_inputs_whose_tokens_bytes_cannot_bound_are_refused_before_any_reserve(tmp_path: Path):
    image = [{"type": "text", "text": "what is this"},
             {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]
    with fake_openai([]) as up:
        out = run_calls(tmp_path, up.base_url, lambda s: [
            s.chat(image)[0], s.chat("q", audio={"voice": "x"})[0], s.chat("q", n=0)[0],
            s.request("POST", "/v1/chat/completions", b"not json")[0]])
        assert up.requests == []
    assert out.value == [400, 400, 400, 400]
    assert not [r for r in out.records if r["type"] == "reserve" and r.get("what") == "llm"]


def test_completions_bound_counts_every_prompt_and_best_of():
    cfg = _cfg()
    one = SHAPES[COMPLETIONS].bound(json.dumps(
        {"model": "m", "prompt": "a", "max_tokens": 10}).encode(), cfg, Asked())
    many = SHAPES[COMPLETIONS].bound(json.dumps(
        {"model": "m", "prompt": ["a", "b", "c"], "max_tokens": 10, "n": 2,
         "best_of": 3}).encode(), cfg, Asked())
    assert one.completion_tokens == 10 and many.completion_tokens == 10 * 3 * 3
    none = SHAPES[CHAT].bound(json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "q"}]}).encode(), cfg, Asked())
    assert json.loads(none.body)["max_tokens"] == 64 and none.completion_tokens == 64
    assert none.prompt_tokens == len(none.body)


def test_parallel_calls_reserve_atomically_and_never_pass_the_budget(tmp_path: Path):
    """32 calls at once against a budget that fits about half of their bounds: each is either
    held (then forwarded) or refused with a 402; the reservations in flight never pass B."""
    with fake_openai([]) as up:
        up.default = Reply("a b c", delay_s=0.2)

        def body(s):
            results: list = []
            barrier = threading.Barrier(32)

            def one():
                barrier.wait()
                results.append(s.chat("q" * 300)[0])
            ts = [threading.Thread(target=one) for _ in range(32)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return results
        out = run_calls(tmp_path, up.base_url, body, ceiling=4.0, budget=4.0,
                        price_prompt_per_1k=2.0, price_completion_per_1k=4.0)
        forwarded = len(up.requests)
    assert sorted(set(out.value)) == [200, 402] and len(out.value) == 32
    calls = out.calls()
    assert sum(not c["refused"] for c in calls) == forwarded == out.value.count(200)
    llm = [r for r in out.records if r.get("what") == "llm"]
    assert sum(r["type"] == "reserve" for r in llm) == forwarded
    assert prefix_excess(out.records) <= 1e-9
    # concurrency was real: several reservations were open at once at some prefix
    open_now = most = 0
    for r in llm:
        open_now += {"reserve": 1, "settle": -1}[r["type"]]
        most = max(most, open_now)
    assert most >= 2


def test_a_client_hanging_up_prints_nothing_but_a_real_server_error_fails_the_owner(capsys):
    """A request thread of the fake upstream must not print a traceback into whichever test
    captures stderr next (test_spec's one-line check caught one): a client that hung up
    (BrokenPipe, reset) is silent and not an error; any other error in the handler is kept and
    fails the block that owns the server."""
    with (pytest.raises(AssertionError, match="KeyError: 'a bug in the fake'"),
          fake_openai([]) as up):
        for exc, kept in ((BrokenPipeError(32, "Broken pipe"), 0),
                          (ConnectionResetError(104, "reset"), 0),
                          (KeyError("a bug in the fake"), 1)):
            try:
                raise exc
            except Exception:  # noqa: BLE001 -- handle_error reads the exception being handled
                up.httpd.handle_error(None, ("127.0.0.1", 1))
            assert capsys.readouterr().err == "", exc
            assert len(up.errors) == kept, (exc, up.errors)
    assert isinstance(up.httpd, QuietServer)
