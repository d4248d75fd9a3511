"""The OpenAI-compatible coder against a local fake server: metered with a reservation before
each call, typed replies, malformed replies fail closed to Keep. No real network."""

from __future__ import annotations

import json

import pytest

from experiments.transition import chat
from experiments.transition.coders import SOLUTION, OpenAICoder, Request, model_meter
from experiments.transition.edits import normalize
from experiments.transition.tasks import Case, Suite, Task
from loopproof.engine.admission.actions import Escalate, Keep, Patch
from loopproof.engine.admission.evidence import Evidence
from loopproof.engine.run.meter import BudgetOverrun
from tests.support.fake_openai import fake_openai

SRC = "def inc(x):\n    return x + 2\n"
FIXED = "def inc(x):\n    return x + 1\n"
TASK = Task("Toy/1", "inc", "def inc(x):\n    '''x plus one'''\n", SRC,
            Suite("visible", (Case("(1,)", "2"),)), Suite("challenge", (Case("(2,)", "3"),)),
            Suite("hidden", (Case("(5,)", "6", True),)))


class Recording:
    """Wraps the engine meter and writes its calls into the shared event list."""

    def __init__(self, events, budget=1.0):
        self.events = events
        self.meter, self.records = model_meter(budget)

    def reserve(self, amount, what="charge"):
        out = self.meter.reserve(amount, what)
        self.events.append("reserve")
        return out

    def settle(self, used, what="charge", **facts):
        self.events.append("settle")
        return self.meter.settle(used, what, **facts)


def coder_for(server, meter, price=0.01):
    return OpenAICoder(server.base_url, "fake-model", meter, price_per_1k=price, max_tokens=100,
                       timeout_s=10)


def request():
    return Request(TASK, SRC, None, (), 7, 1)


def test_a_patch_reply_is_a_patch_and_each_call_is_reserved_before_it_is_sent():
    events: list[str] = []
    reply = json.dumps({"action": "patch", "files": {SOLUTION: FIXED}, "note": "done"})
    with fake_openai([reply, json.dumps({"action": "escalate", "reason": "unclear spec"})],
                     events) as server:
        meter = Recording(events)
        coder = coder_for(server, meter)
        r1 = coder.revise(request())
        r2 = coder.revise(request())
    assert isinstance(r1.action, Patch) and r1.action.files[SOLUTION] == FIXED and r1.claims_done
    assert isinstance(r2.action, Escalate) and not r2.claims_done
    assert events == ["reserve", "request", "settle"] * 2
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "fake-model" and body["seed"] == 7 and body["max_tokens"] == 100
    assert "x plus one" in body["messages"][1]["content"]
    kinds = [r["event"] for r in meter.records]
    assert kinds == ["Reserve", "Settle"] * 2
    # the settle charges the reported usage (500 tokens at 0.01 per 1k), never above the hold
    holds = [r["amount"] for r in meter.records if r["event"] == "Reserve"]
    assert all(h > 0 for h in holds)
    assert meter.meter._state().settled == pytest.approx(sum(min(0.005, h) for h in holds))


@pytest.mark.parametrize("content", [
    "STATUS: DONE",
    "not json at all",
    json.dumps({"action": "patch", "files": {}}),
    json.dumps({"action": "patch", "files": {"other.py": FIXED}}),
    json.dumps({"action": "patch", "files": {SOLUTION: "def inc(x:\n"}}),
    json.dumps({"action": "launch"}),
    json.dumps(["patch"]),
    "",
])
def test_malformed_replies_fail_closed_to_keep(content):
    with fake_openai([content]) as server:
        coder = coder_for(server, Recording([]))
        r = coder.revise(request())
    assert isinstance(r.action, Keep) and r.valid is False and r.claims_done is False


@pytest.mark.parametrize("reply", [("status", 500), ("raw", b"{\"choices\": []}"), ("raw", b"<html>")])
def test_server_errors_are_keep_and_the_reservation_is_settled(reply):
    events: list[str] = []
    with fake_openai([reply], events) as server:
        meter = Recording(events)
        r = coder_for(server, meter).revise(request())
    assert isinstance(r.action, Keep) and not r.valid
    assert events == ["reserve", "request", "settle"]
    assert meter.meter.outstanding == 0


def test_a_reservation_that_does_not_fit_stops_before_any_request():
    events: list[str] = []
    with fake_openai(["{}"], events) as server:
        meter = Recording(events, budget=0.0001)
        coder = coder_for(server, meter, price=1.0)  # (chars/3 + 100) tokens at 1.0 per 1k
        with pytest.raises(BudgetOverrun):
            coder.revise(request())
    assert server.requests == [] and "request" not in events
    assert meter.records[-1]["event"] == "Overrun"


# --------------------------------------------------------------------------- the chat protocol
MODULE = ("from typing import List\n\n\ndef _twice(x):\n    return 2 * x\n\n\n"
          "def inc(xs: List[int]):\n    '''x plus one'''\n    return [_twice(x) for x in xs]\n")


def test_the_prompt_shows_the_whole_file_and_asks_for_the_changed_functions():
    """The model sees every import and helper of the file, and is asked for only the functions it
    changes (or a diff): a 0.5B model asked for the whole file returned it unchanged in all 75
    of its distinct patches."""
    msgs = chat.messages(TASK.prompt, MODULE, None)
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert f"```python\n{MODULE}```" in user          # the whole current file, verbatim
    assert "the rest of the file is kept" in system and "the rest of the file is kept" in user
    assert "only the functions you change" in user and "nothing after it" in user
    assert chat.NO_EVIDENCE in user
    # the same words for every evidence condition: only the evidence text differs
    ev = Evidence("h", "s", "x", {"text": "visible: FAIL"})
    other = chat.messages(TASK.prompt, MODULE, ev)[1]["content"]
    assert other.replace("visible: FAIL", chat.NO_EVIDENCE) == user


def test_a_failing_check_is_shown_as_the_call_what_it_should_return_and_what_it_returned():
    ev = Evidence("h", "s", "x", {"check": "visible", "verdict": "fail", "text": "raw",
                                  "failed": [{"args": "(1, [2, 3])", "expected": "5",
                                              "actual": "4"}]})
    user = chat.messages(TASK.prompt, MODULE, ev, "inc")[1]["content"]
    assert ("visible: FAIL\nThe failing call: inc(1, [2, 3])\nIt should return: 5\n"
            "It returned:      4") in user and "raw" not in user
    # a passing trace, and evidence without an entry name, are shown as their text
    ok = Evidence("h", "s", "x", {"verdict": "pass", "text": "visible: PASS (1 assertions)"})
    assert "visible: PASS (1 assertions)" in chat.messages(TASK.prompt, MODULE, ok, "inc")[1][
        "content"]
    assert "raw" in chat.messages(TASK.prompt, MODULE, ev)[1]["content"]


@pytest.mark.parametrize(("content", "claims"), [
    (f"STATUS: DONE\n```python\n{MODULE}```", True),
    (f"STATUS: UNSURE\n```python\n{MODULE}```\n", False),
    (f"\n```python\n{MODULE}```  \n", False),
    (f"STATUS: DONE\n\n```py\n{MODULE}\n```", True),
    # both local models explain their fix after the block: the explanation is ignored
    (f"STATUS: DONE\n```python\n{MODULE}```\n\nThis version fixes the loop.\nIt is done.", True),
])
def test_a_fenced_module_is_a_patch_of_the_whole_file(content, claims):
    r = OpenAICoder.parse(content)
    assert r.valid and isinstance(r.action, Patch)
    assert r.action.files[SOLUTION] == normalize(MODULE) and r.claims_done is claims


def test_keep_and_escalate_lines_are_actions():
    assert isinstance(OpenAICoder.parse("KEEP\n").action, Keep)
    assert OpenAICoder.parse("KEEP").valid
    r = OpenAICoder.parse("ESCALATE: the task contradicts its examples")
    assert isinstance(r.action, Escalate) and r.valid and not r.claims_done
    assert r.action.reason == "the task contradicts its examples"


@pytest.mark.parametrize(("content", "why"), [
    # prose around the block: not one reply form (nothing is guessed out of free text)
    (f"Here is the fix:\n```python\n{MODULE}```", "not_an_action"),
    # an explanation after the block is ignored, but not one holding a fence or a status line
    (f"STATUS: DONE\n```python\n{MODULE}```\nI changed the loop.\n```python\nx\n```",
     "not_an_action"),
    (f"```python\n{MODULE}```\nThat is all.\nSTATUS: DONE", "not_an_action"),
    # two blocks: which one would be the file?
    (f"```python\n{MODULE}```\n```python\n{MODULE}```", "not_an_action"),
    # a status line after the block or a KEEP with a patch: not a form either
    (f"```python\n{MODULE}```\nSTATUS: DONE", "not_an_action"),
    (f"KEEP\n```python\n{MODULE}```", "not_an_action"),
    ("ESCALATE:   ", "not_an_action"),
    ("keep", "not_an_action"),
    # a bare fence is not a patch: a JSON object in it must not become the module `{...}`
    ("```\n" + json.dumps({"action": "patch", "files": {"x.py": "1"}}) + "\n```", "wrong_file"),
    ("STATUS: DONE", "done_only"),
    ("STATUS: DONE\n```python\ndef inc(x:\n```", "syntax_error"),
    ("STATUS: DONE\n```python\n\n```", "not_an_action"),   # a patch with no code
])
def test_anything_else_fails_closed_to_keep(content, why):
    r = OpenAICoder.parse(content)
    assert isinstance(r.action, Keep) and not r.valid and not r.claims_done and r.why == why


def test_the_engine_json_schema_is_still_an_action():
    r = OpenAICoder.parse("```json\n" + json.dumps(
        {"action": "patch", "files": {SOLUTION: FIXED}, "note": "done"}) + "\n```")
    assert r.valid and r.action.files[SOLUTION] == FIXED and r.claims_done
    assert isinstance(OpenAICoder.parse('{"action": "keep"}').action, Keep)
