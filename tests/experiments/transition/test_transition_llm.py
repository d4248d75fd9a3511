"""The local-model path without a model: the loopback server's life cycle (echo backend), the
recording and replaying proxy, the stored reply set, and `--coder llm` end to end with the
model server replaced by the echo backend. The real model's replies are replayed from the reply
set stored in experiments/transition/replies/ (recorded by `--scale llm-smoke`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from experiments.transition import llm_run, llm_server, replies, study
from experiments.transition.coders import Request
from loopproof.engine.system.errors import BadInput
from tests.support.fake_openai import Reply, fake_openai
from tests.support.paths import REPO

STORED = REPO / "experiments" / "transition" / "replies"


def post(url: str, body: object) -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


# --------------------------------------------------------------------------- the server
def test_the_server_starts_answers_both_endpoints_and_stops():
    with llm_server.serve(None, backend="echo") as (base, health):
        assert health["status"] == "ok" and base.startswith("http://127.0.0.1:")
        status, chat = post(base + "/chat/completions", {
            "model": "m", "max_tokens": 10, "temperature": 0,
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]})
        assert status == 200 and chat["choices"][0]["message"]["content"] == '{"action": "keep"}'
        assert chat["usage"]["total_tokens"] == chat["usage"]["prompt_tokens"] + 5
        status, comp = post(base + "/completions", {"prompt": "x", "max_tokens": 3})
        assert status == 200 and comp["choices"][0]["text"] == " keep"
        assert llm_server.get_json(base + "/models")["data"][0]["id"] == "echo"
        port = int(base.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(OSError):  # stopped: nothing listens any more
        llm_server.get_json(f"http://127.0.0.1:{port}/health", timeout=2)


@pytest.mark.parametrize("body, problem", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": "u"}], "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "user", "content": "u"}], "max_tokens": "9"}, "max_tokens"),
    ({"messages": [{"role": "user", "content": "u"}], "temperature": -1}, "temperature"),
    ({"messages": [{"role": "assistant", "content": "a"}]}, "messages"),
    ({"messages": [{"role": "root", "content": "u"}]}, "messages"),
    ([1, 2], "JSON object"),
])
def test_bad_requests_are_400_with_a_message(body, problem):
    status, out = llm_server.handle(llm_server.EchoBackend(), threading.Lock(),
                                    "/v1/chat/completions", body)
    assert status == 400 and problem in out["error"]["message"]


def test_a_server_that_cannot_load_is_one_line_with_its_reason(tmp_path):
    with pytest.raises(BadInput) as exc, llm_server.serve(tmp_path / "missing.gguf"):
        pass
    msg = str(exc.value)
    assert "exited with code 2" in msg and "no such file" in msg and "\n" not in msg


def test_the_server_exits_when_its_parent_is_killed(tmp_path):
    """SIGKILL the experiment: its model server must not live on holding 0.5 GB and two cores."""
    code = ("import sys, time; from experiments.transition import llm_server\n"
            "with llm_server.serve(None, backend='echo') as (base, h):\n"
            "    print(base, flush=True); time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    base = parent.stdout.readline().strip()
    assert llm_server.get_json(base.removesuffix("/v1") + "/health")["status"] == "ok"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            llm_server.get_json(base.removesuffix("/v1") + "/health", timeout=1)
        except OSError:
            break
        time.sleep(0.3)
    else:
        pytest.fail("the model server outlived its parent")


# --------------------------------------------------------------------------- the proxy
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0,
        "seed": 1, "max_tokens": 5}


def test_live_mode_asks_once_per_distinct_request_and_replay_gives_the_same_bytes():
    with fake_openai(["first", "second"]) as upstream:
        proxy = replies.Proxy(upstream.base_url)
        with replies.running(proxy) as url:
            a = post(url + "/chat/completions", BODY)
            b = post(url + "/chat/completions", BODY)          # same request: not asked again
            c = post(url + "/chat/completions", {**BODY, "seed": 2})
    assert len(upstream.requests) == 2 and a == b
    assert a[1]["choices"][0]["message"]["content"] == "first"
    assert c[1]["choices"][0]["message"]["content"] == "second"
    assert proxy.requests == 3 and proxy.model_calls == 2 and len(proxy.used) == 2
    stored = json.loads(json.dumps(proxy.used))
    replay = replies.Proxy(None, stored)
    with replies.running(replay) as url:
        assert post(url + "/chat/completions", BODY) == a
        status, _ = post(url + "/chat/completions", {**BODY, "seed": 3})
    assert status == 502 and replay.misses == 1
    assert replies.dumps(replay.used) != replies.dumps(proxy.used)  # only what was used


def test_a_stored_reply_set_that_was_edited_is_refused(tmp_path):
    e = replies.entry("/v1/chat/completions", BODY, '{"action": "keep"}', "stop",
                      {"total_tokens": 3})
    path = tmp_path / "replies.jsonl"
    path.write_text(replies.dumps({e["request_sha256"]: e}))
    assert set(replies.load(path)) == {e["request_sha256"]}
    forged = dict(e, content='{"action": "patch", "files": {"solution.py": "x = 1"}}')
    path.write_text(json.dumps(forged) + "\n")
    with pytest.raises(BadInput, match=r"replies.jsonl:1: request_sha256/reply_sha256"):
        replies.load(path)
    moved = dict(e, request={**BODY, "seed": 9})  # a reply filed under another request
    path.write_text(json.dumps(moved) + "\n")
    with pytest.raises(BadInput, match="hash does not match"):
        replies.load(path)
    path.write_text("not json\n")
    with pytest.raises(BadInput, match="not a reply entry"):
        replies.load(path)


def test_an_upstream_failure_voids_the_run_and_is_not_stored(tmp_path):
    with fake_openai([("status", 500)]) as upstream:
        proxy = replies.Proxy(upstream.base_url, journal=tmp_path / "j.jsonl")
        with replies.running(proxy) as url:
            status, _ = post(url + "/chat/completions", BODY)
    assert status == 502 and proxy.failure and proxy.used == {}
    sess = llm_run.Session({}, proxy, "model", llm_run.weights.Q05)
    with pytest.raises(BadInput, match="model server"):
        sess.finish()


def test_an_interrupted_run_resumes_from_its_journal(tmp_path):
    journal = tmp_path / "journal.jsonl"
    with fake_openai([Reply("first reply")]) as upstream:  # 2 completion tokens
        proxy = replies.Proxy(upstream.base_url, journal=journal)
        with replies.running(proxy) as url:
            a = post(url + "/chat/completions", BODY)
    with open(journal, "a") as f:
        f.write('{"request_sha256": "torn')  # the write the crash interrupted
    with fake_openai([]) as upstream:  # asking the model again would get "{}" instead
        again = replies.Proxy(upstream.base_url, journal=journal)
        with replies.running(again) as url:
            assert post(url + "/chat/completions", BODY) == a
    assert again.resumed == 1 and upstream.requests == []
    # a resumed reply cost this run nothing: the manifest's tokens/s must not count it
    assert again.model_calls == again.called_completion_tokens == 0
    assert proxy.called_completion_tokens == proxy.tokens()["completion"] == 2
    assert again.tokens()["completion"] == 2


# --------------------------------------------------------------------------- end to end
@pytest.fixture
def echo_model(monkeypatch, tmp_path):
    """--coder llm with the echo server instead of the model and no weights fetched."""
    monkeypatch.setattr(llm_run.weights, "ensure", lambda w, cache=None: tmp_path / "w.gguf")
    real = llm_server.serve

    def serve(model_file, threads=2, **kw):
        return real(None, threads, backend="echo")

    monkeypatch.setattr(llm_run.llm_server, "serve", serve)
    monkeypatch.setenv("LOOPPROOF_MODEL_CACHE", str(tmp_path / "cache"))


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name != "manifest.json"}


def test_llm_run_then_replay_is_byte_identical_and_a_rerun_counts_differences(
        echo_model, tmp_path, capsys):
    out, rep = tmp_path / "live", tmp_path / "replay"
    args = ["--coder", "llm", "--scale", "llm-smoke", "--seed", "0", "--threads", "1"]
    assert study.main([*args, "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == "model" and manifest["runtime"]["runtime"] == "echo"
    assert manifest["model_calls"] == manifest["unique_requests"] > 0
    assert manifest["requests"] >= manifest["unique_requests"]
    assert manifest["model"]["sha256"] == llm_run.weights.Q05.sha256
    summary = json.loads((out / "summary.json").read_text())
    assert summary["coder"] == "llm-0.5b" and summary["model"].startswith("Qwen2.5 Coder 0.5B")
    assert summary["validity"]["all"]["valid_share"] == 1.0  # echo says keep, a valid action
    assert study.main([*args, "--replay", str(out), "--out", str(rep)]) == 0
    assert files(out) == files(rep)
    assert json.loads((rep / "manifest.json").read_text())["mode"] == "replay"
    # a rerun with the model into the same folder compares its replies with the stored ones
    stored = replies.load(out / replies.FILE)
    key = sorted(stored)[0]
    changed = replies.entry(stored[key]["path"], stored[key]["request"], "something else",
                            "stop", {})
    (out / replies.FILE).write_text(replies.dumps({**stored, key: changed}))
    capsys.readouterr()
    assert study.main([*args, "--out", str(out)]) == 0
    diff = json.loads((out / "manifest.json").read_text())["replies_vs_previous_run"]
    assert diff == {"compared": len(stored), "differed": 1, "new": 0}
    assert "1 differed" in capsys.readouterr().err


def test_a_replay_whose_replies_are_missing_writes_nothing(echo_model, tmp_path, capsys):
    out = tmp_path / "live"
    args = ["--coder", "llm", "--scale", "llm-smoke", "--threads", "1"]
    assert study.main([*args, "--out", str(out)]) == 0
    stored = replies.load(out / replies.FILE)
    (out / replies.FILE).write_text(replies.dumps(dict(sorted(stored.items())[1:])))
    capsys.readouterr()
    assert study.main([*args, "--replay", str(out), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "have no stored reply" in err and "fix:" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_replay_without_a_reply_set_and_replay_without_llm_are_one_line(tmp_path, capsys):
    assert study.main(["--coder", "llm", "--replay", str(tmp_path), "--out",
                       str(tmp_path / "o")]) == 2
    assert "no stored reply set" in capsys.readouterr().err
    assert study.main(["--replay", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "only for --coder llm" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_real_models_stored_replies_replay_to_the_stored_rows(tmp_path):
    """Replies of Qwen2.5 Coder 1.5B at --scale llm-smoke (the first task's first revisions of
    its llm-short run), replayed without the model: every request of the protocol finds its
    reply, and the rows come out byte for byte. A change to the prompts, tasks or evidence breaks
    this (rerecord with the model, docs/transition.md)."""
    out = tmp_path / "replay"
    assert study.main(["--coder", "llm", "--llm", "1.5b", "--scale", "llm-smoke", "--seed", "0",
                       "--replay", str(STORED / "llm-smoke"), "--out", str(out)]) == 0
    for name in ("replies.jsonl", "trajectories.json", "common_state.json", "prospective.json"):
        assert (out / name).read_bytes() == (STORED / "llm-smoke" / name).read_bytes(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "Qwen2.5 Coder 1.5B Instruct GGUF"
    assert summary["validity"]["all"]["replies"] > 0


def test_the_client_reserves_before_each_call_through_the_proxy():
    """The llm coder is the plain openai client: a reservation that does not fit sends nothing."""
    from experiments.transition.coders import OpenAICoder, model_meter
    from experiments.transition.tasks import select_tasks
    from loopproof.engine.run.meter import BudgetOverrun

    task = select_tasks(1)[0]
    with fake_openai(['{"action": "keep"}']) as upstream:
        proxy = replies.Proxy(upstream.base_url)
        with replies.running(proxy) as url:
            meter, records = model_meter(0.1)  # 100 tokens at one unit per 1,000
            coder = OpenAICoder(url, "m", meter, price_per_1k=llm_run.PRICE_PER_1K)
            with pytest.raises(BudgetOverrun):
                coder.revise(Request(task, task.reference, None))
    assert upstream.requests == [] and proxy.requests == 0
    assert records[-1]["event"] == "Overrun"
