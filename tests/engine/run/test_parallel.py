"""Several attempts in flight under one budget (`[graph] max_parallel`, `run --jobs N`).

What each test holds the engine to, on the real ledger file:
- attempts of independent nodes run at once (a barrier that only opens with all of them in
  flight), their records interleave and each names its node; `show` gives every record to its
  own attempt; G3 holds at every prefix (tests/support/oracles.py, one reservation set per attempt);
- admission counts the ceilings the attempts in flight hold, so every admitted attempt can
  spend its whole c_v however its siblings spend (the race of a budget check that two requests
  both pass cannot make one of them come up short or the run pass B);
- many model-call holds of several attempts at once, under one B: none is refused by a race
  (a commit the model refuses), none passes its c_v or B;
- a real SIGKILL with several attempts in flight: resume gives back each one (an `abandon`,
  charged its own reservation), none is lost, none counted twice;
- `--jobs N` is kept in the ledger and used by resume; a bad N is exit 2, nothing written.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.record.replay import replay
from loopproof.engine.record.timeline import build
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.runner import Runner
from tests.support.engine_child import started
from tests.support.oracles import CallableKind, assert_g3, records, spend_at_every_prefix
from tests.support.specs import write_spec

KIND = CallableKind("test_parallel_py")


def fan_spec(tmp_path: Path, fn: str, n: int, *, budget: float, ceiling: float,
             max_parallel: int, attempts: int = 1) -> spec_mod.Spec:
    """n independent nodes of `fn`, at most `max_parallel` in flight."""
    nodes: dict = {}
    for i in range(n):
        nodes |= KIND.node(f"w{i}", fn, spend_ceiling=ceiling, attempts=attempts)
    return spec_mod.load(write_spec(tmp_path, nodes, spend_budget=budget,
                                    max_parallel=max_parallel))


def in_flight_at_every_prefix(recs: list[dict]) -> list[int]:
    """How many attempts are open after each record: a begin opens one of its node; a verdict,
    an overrun or an abandon of that node ends it. A begin of a node already open fails."""
    flying: set[str] = set()
    out = []
    for i, r in enumerate(recs):
        if r["type"] == "begin":
            assert r["node"] not in flying, (i, r, "a second attempt of a node in flight")
            flying.add(r["node"])
        elif r["type"] in ("verdict", "overrun", "abandon"):
            flying.discard(r["node"])
        out.append(len(flying))
    return out


def run(spec: spec_mod.Spec, ledger: Path) -> int:
    runner = Runner.start(spec, ledger)
    try:
        return runner.run()
    finally:
        runner.close()


def test_independent_attempts_run_at_once_and_each_record_names_its_attempt(
        tmp_path: Path) -> None:
    barrier = threading.Barrier(4, timeout=20)  # opens only with four workers in flight

    def worker(ctx):
        ctx.meter.charge(0.5, "before")
        barrier.wait()
        ctx.meter.charge(0.25, "after")
        return "ok"

    fn = KIND.add("at_once", worker)
    ledger = tmp_path / "L.jsonl"
    assert run(fan_spec(tmp_path, fn, 8, budget=100.0, ceiling=2.0, max_parallel=4),
               ledger) == 0
    recs = records(ledger)
    flying = in_flight_at_every_prefix(recs)
    assert max(flying) == 4  # the limit is reached, never passed
    assert_g3(recs)
    assert replay(recs).state.attempts_total == 8
    # interleaved: some record of another node lies between a begin and its verdict
    begins = {r["node"]: r["seq"] for r in recs if r["type"] == "begin"}
    verdicts = {r["node"]: r["seq"] for r in recs if r["type"] == "verdict"}
    assert any(r.get("node") not in (None, n) and begins[n] < r["seq"] < verdicts[n]
               for n in begins for r in recs)
    # every reserve/settle/overrun names its node, and `show` folds each into its own attempt
    assert all(isinstance(r.get("node"), str) for r in recs
               if r["type"] in ("reserve", "settle", "overrun", "claim", "verdict"))
    timeline = build(ledger)
    assert len(timeline.attempts) == 8 and not timeline.open_attempts
    for a in timeline.attempts:
        assert a.outcome == "accept" and a.worker_spend == pytest.approx(0.75), a.as_json()
        assert a.end_seq == verdicts[a.node]
    assert timeline.unfinished() is None
    assert max(len(a.beside) for a in timeline.attempts) == 3  # began beside three in flight
    from loopproof.engine.commands.show import text
    assert "began beside" in text(timeline)


def test_admission_counts_the_ceilings_held_in_flight(tmp_path: Path) -> None:
    """B = 10 and c_v = 4: two attempts fit beside each other, a third does not (4+4+4 > 10),
    however little the two have reserved yet. Each admitted attempt then asks for all of c_v
    but what its gate run needs, in one go at the same moment, and none is refused: the room
    was held for it at Begin."""
    refused: list[str] = []
    barrier = threading.Barrier(2, timeout=20)

    def worker(ctx):
        barrier.wait()  # both in flight, neither has reserved anything
        try:
            ctx.meter.charge(3.5, "c_v but the gate's part")
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            refused.append(repr(exc))
        return "ok"

    fn = KIND.add("whole_ceiling", worker)
    ledger = tmp_path / "L.jsonl"
    code = run(fan_spec(tmp_path, fn, 4, budget=10.0, ceiling=4.0, max_parallel=4), ledger)
    recs = records(ledger)
    assert refused == []
    assert max(in_flight_at_every_prefix(recs)) == 2
    assert code == 4  # two DONE (7 and a little settled); the third cannot be paid for
    assert [r["type"] for r in recs[-1:]] == ["refuse"]
    end = assert_g3(recs, 10.0)
    assert 7.0 <= end.settled < 7.5 and end.reserved == 0.0


def test_holds_of_several_attempts_at_once_under_one_budget(tmp_path: Path) -> None:
    """48 model-call holds, 12 from each of 4 attempts in flight, all asked at one moment:
    no commit is refused by the model (a race between a check and its record would be), no
    attempt holds past its c_v, the run never passes B, and c_v is reached (some refused)."""
    plan = [0.5, 1.0, 1.5, 2.5] * 3
    barrier = threading.Barrier(4 * len(plan), timeout=30)
    got: dict[str, list] = {"held": [], "refused": [], "errors": []}

    def worker(ctx):
        def call(key: str, amount: float) -> None:
            barrier.wait()
            try:
                if ctx.meter.hold(key, amount, "llm", call=key):
                    got["held"].append(amount)
                    ctx.meter.release(key, amount / 2, "llm", call=key)
                else:
                    got["refused"].append(amount)
            except Exception as exc:  # noqa: BLE001 - a race shows as a refused commit
                got["errors"].append(repr(exc))

        threads = [threading.Thread(target=call, args=(f"{ctx.node}-c{i}", a))
                   for i, a in enumerate(plan)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return "ok"

    fn = KIND.add("holds", worker)
    ledger = tmp_path / "L.jsonl"
    assert run(fan_spec(tmp_path, fn, 4, budget=24.0, ceiling=6.0, max_parallel=4),
               ledger) == 0
    recs = records(ledger)
    assert got["errors"] == [], got["errors"][:3]
    assert got["held"] and got["refused"]
    assert max(in_flight_at_every_prefix(recs)) == 4
    assert_g3(recs, 24.0)
    for node in ("w0", "w1", "w2", "w3"):  # each attempt charged within its own c_v
        charged = sum(r["amount"] for r in recs if r["type"] == "settle" and r["node"] == node)
        assert 0 < charged <= 6.0 + 1e-9, (node, charged)


def test_the_g3_oracle_fails_a_second_attempt_over_its_ceiling() -> None:
    """The oracle itself can fail: two attempts in flight, the second holding past its c_v
    (each within B), and a reservation of a node that has no attempt in flight."""
    head = {"type": "run", "graph": {"spend_budget": 10.0, "nodes": [
        {"name": "a", "spend_ceiling": 2.0}, {"name": "b", "spend_ceiling": 2.0}]}}
    ok = [head, {"type": "begin", "node": "a"}, {"type": "begin", "node": "b"},
          {"type": "reserve", "node": "a", "amount": 2.0},
          {"type": "reserve", "node": "b", "amount": 2.0}]
    assert_g3(ok)
    assert spend_at_every_prefix(ok)[-1].reserved == 4.0
    with pytest.raises(AssertionError):
        assert_g3([*ok, {"type": "reserve", "node": "b", "amount": 0.5}])
    with pytest.raises(AssertionError):
        assert_g3([head, {"type": "reserve", "node": "a", "amount": 1.0}])


# ---- a real SIGKILL with several attempts in flight ---------------------------------------------

# Each worker marks its start in a folder outside the workspaces, then waits while the file
# `hold` beside the folder is there: long enough to be killed in flight.
SLOW_ONCE = 'echo start >> "$0/$LOOPPROOF_NODE"; while [ -e "$0.hold" ]; do sleep 0.05; done'



def test_sigkill_with_several_attempts_in_flight_gives_back_each_on_resume(
        tmp_path: Path, capsys) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    hold = tmp_path / "marks.hold"
    hold.touch()
    lines = ["[graph]", "spend_budget = 200.0", 'sandbox = "none"']
    for i in range(4):
        lines += [f"[node.w{i}]", f"worker = {json.dumps(['sh', '-c', SLOW_ONCE, str(marks)])}",
                  'gate = ["true"]', "spend_ceiling = 40.0", "timeout_s = 35",
                  "gate_timeout_s = 5"]
    spec = tmp_path / "graph.toml"
    spec.write_text("\n".join(lines) + "\n")
    ledger = tmp_path / "L.jsonl"
    with started(["cli", "run", str(spec), "--ledger", str(ledger), "--jobs", "3"],
                 drop_loopproof=True) as child:
        deadline = time.monotonic() + 60
        while len(list(marks.iterdir())) < 3:  # three workers started: three in flight
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
        hold.unlink()
    recs = records(ledger)
    assert recs[0]["jobs"] == 3 and recs[0]["graph"]["max_parallel"] == 3
    assert in_flight_at_every_prefix(recs)[-1] == 3
    assert_g3(recs)
    open_nodes = sorted(replay(recs).state.in_flight(replay(recs).graph))
    assert len(open_nodes) == 3
    assert "3 attempts open" in build(ledger).unfinished()

    assert cli.main(["resume", "--ledger", str(ledger), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    recs = records(ledger)
    abandons = [r for r in recs if r["type"] == "abandon"]
    assert sorted(r["node"] for r in abandons) == open_nodes  # each given back, once
    assert all(r["outcome"] == "unknown" for r in abandons)
    assert report["outcome"] == "DONE" and report["outcome_unknown"] == 3
    assert report["repeated_executions"] == 3
    assert report["attempts_total"] == 4  # none lost, none counted twice
    assert all(v["attempts"] == 1 for v in report["nodes"].values())
    assert_g3(recs)
    assert max(in_flight_at_every_prefix(recs)) <= 3
    # each killed attempt charged its own open reservation, as the oracle recomputes it
    spends = spend_at_every_prefix(recs)
    for r in abandons:
        i = recs.index(r)
        before = dict((n, res) for n, res, _ in spends[i - 1].by_node)
        assert r["charged"] == pytest.approx(before[r["node"]])
    assert cli.main(["verify", str(ledger), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "verified"


def test_jobs_bad_input_writes_nothing(tmp_path: Path, capsys) -> None:
    fn = KIND.add("noop", lambda ctx: "ok")
    spec = fan_spec(tmp_path, fn, 2, budget=10.0, ceiling=1.0, max_parallel=1)
    for bad in ("0", "-3", "100000"):
        ledger = tmp_path / f"L{bad}.jsonl"
        assert cli.main(["run", str(spec.path), "--ledger", str(ledger), "--jobs", bad]) == 2
        err = capsys.readouterr().err
        assert "--jobs" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not ledger.exists()
    (tmp_path / "graph.toml").write_text((tmp_path / "graph.toml").read_text().replace(
        "max_parallel = 1", "max_parallel = 0"))
    assert cli.main(["run", str(tmp_path / "graph.toml"), "--ledger",
                     str(tmp_path / "L.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "max_parallel" in err and "Traceback" not in err
    assert not (tmp_path / "L.jsonl").exists()


def test_model_calls_of_several_attempts_at_once_through_their_proxies(tmp_path: Path) -> None:
    """Three attempts in flight, each with its own metered proxy, each sending 8 chat calls at
    the same moment (24 at once against one upstream), under one B: every call is reserved
    before it is sent and none passes its attempt's c_v or B at any prefix (the race of a
    check that two requests both pass); c_v binds (some calls are answered 402); no call of
    one attempt is charged to another."""
    from tests.support.fake_openai import Reply, fake_openai
    from tests.support.proxy_helpers import run_calls_in_parallel

    barrier = threading.Barrier(3 * 8, timeout=30)

    def body(session):
        got: list[int] = []

        def call() -> None:
            barrier.wait()
            status, _ = session.chat("count to ten")
            got.append(status)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(got)

    with fake_openai([]) as up:
        up.default = Reply("one two three four five six seven eight")
        out = run_calls_in_parallel(tmp_path, up.base_url, body, nodes=3, ceiling=0.5,
                                    budget=1.5)
    assert out.exit == 0, out.records[-3:]
    recs = out.records
    assert max(in_flight_at_every_prefix(recs)) == 3
    assert_g3(recs, 1.5)
    statuses = [s for v in out.value.values() for s in v]
    assert len(statuses) == 24 and set(statuses) <= {200, 402}
    assert 200 in statuses and 402 in statuses  # the ceilings bound the calls
    calls = [r for r in recs if r["type"] == "llm_call"]
    assert len(calls) == 24
    for node in ("n0", "n1", "n2"):  # each call's hold and charge are its own attempt's
        mine = {r["call"] for r in calls if r["node"] == node}
        assert len(mine) == 8
        assert {r["call"] for r in recs if r["type"] in ("reserve", "settle")
                and r.get("what") == "llm" and r["node"] == node} <= mine
        charged = sum(r["amount"] for r in recs if r["type"] == "settle" and r["node"] == node)
        assert charged <= 0.5 + 1e-9


def test_the_progress_display_shows_every_attempt_in_flight(tmp_path: Path) -> None:
    """The live table, drawn after a record of a run with three attempts in flight, marks each
    of them and names them all under the table."""
    import io

    from rich.console import Console

    from loopproof.engine.run.progress import LiveProgress

    seen: list[str] = []
    barrier = threading.Barrier(3, timeout=20)

    def worker(ctx):
        barrier.wait()
        return "ok"

    fn = KIND.add("progress", worker)
    runner = Runner.start(fan_spec(tmp_path, fn, 3, budget=10.0, ceiling=1.0, max_parallel=3),
                          tmp_path / "L.jsonl")
    live = LiveProgress(io.StringIO())

    def draw(r, record):
        if len(r.state.in_flight(r.graph)) == 3 and not seen:
            console = Console(file=io.StringIO(), width=120, record=True)
            console.print(live.render(r))
            seen.append(console.export_text())

    runner.progress = draw
    try:
        assert runner.run() == 0
    finally:
        runner.close()
    assert seen and "in flight 3/3: w0, w1, w2" in seen[0], seen
