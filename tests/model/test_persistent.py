"""Row and Bag are values like the tuple and frozenset they stand for, and a RunState holding
them is the same state: equal, same hash, same summary, same replay result."""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import loopproof.model.persistent as persistent
from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.persistent import Bag, Row, added, replaced, replaced_many
from loopproof.model.state import RunState, initial_state
from loopproof.model.transitions import Begin, Cancel, Verdict, control_events, step


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 1024, 1025, 40_000])
def test_a_row_is_its_tuple(n: int) -> None:
    items = tuple(range(n))
    row = Row(items)
    assert row == items and items == row and hash(row) == hash(items) and len(row) == n
    assert tuple(row) == items and list(reversed(row)) == list(reversed(items))
    assert pickle.loads(pickle.dumps(row)) == items
    if n:
        assert row[-1] == items[-1] and row[n // 2] == n // 2 and row[1:3] == items[1:3]
        changed = row.set(n - 1, "x")
        assert row == items  # unchanged: a new value, not an edit
        assert changed == items[:-1] + ("x",) and changed != items
        assert changed.count("x") == 1 and changed.index("x") == n - 1 and "x" in changed
        assert hash(changed) == hash(items[:-1] + ("x",))
    with pytest.raises(IndexError):
        row[n]
    with pytest.raises(IndexError):
        row.set(n, 0)


@given(st.integers(0, 2_000), st.lists(st.tuples(st.integers(0, 10**6), st.integers()),
                                        max_size=60))
def test_row_updates_match_a_list(n: int, writes: list[tuple[int, int]]) -> None:
    ref, row, history = list(range(n)), Row(range(n)), []
    for i, v in writes:
        if not n:
            break
        history.append((row, tuple(ref)))
        ref[i % n] = v
        row = row.set(i % n, v)
        assert row[i % n] == v
    assert row == tuple(ref)
    assert all(old == was for old, was in history)  # every earlier version is intact


@given(st.lists(st.tuples(st.text(max_size=3), st.integers(0, 5)), max_size=300))
def test_a_bag_is_its_frozenset(items: list[tuple[str, int]]) -> None:
    bag, ref = Bag(), frozenset()
    for x in items:
        before, was = bag, ref
        bag, ref = bag.add(x), ref | {x}
        assert before == was  # unchanged
    assert bag == ref and ref == bag and set(ref) == bag and hash(bag) == hash(ref)
    assert len(bag) == len(ref) and set(bag) == set(ref) and all(x in bag for x in ref)
    assert ("zz", 9) not in bag and pickle.loads(pickle.dumps(bag)) == ref
    assert (bag | {("q", 1)}) == ref | {("q", 1)} and Bag(ref) == bag


def test_the_helpers_switch_past_small(monkeypatch) -> None:
    small = tuple(range(persistent.SMALL))
    assert type(replaced(small, 0, 9)) is tuple
    assert type(replaced(small + (0,), 0, 9)) is Row
    assert type(replaced_many(small + (0,), {0: 9})) is Row
    assert replaced_many(Row(range(200)), {3: "a", 150: "b"}) == tuple(
        "a" if i == 3 else "b" if i == 150 else i for i in range(200))
    assert type(added(frozenset(range(persistent.SMALL)), -1)) is Bag
    assert type(added(frozenset(), 1)) is frozenset


def chain(n: int, k: int) -> LoopGraph:
    return LoopGraph.build([NodeSpec(f"n{i}", attempts=2, needs=(f"n{i - 1}",) if i else (),
                                     repairs=(f"n{max(0, i - 3)}",))
                            for i in range(n)], repair_budget=k)


def walk(graph: LoopGraph, seed: int, steps: int) -> list[RunState]:
    """A random run through the model: each state, from the initial one."""
    rng, s, out = random.Random(seed), initial_state(graph), []
    out.append(s)
    for _ in range(steps):
        events = list(control_events(graph, s))
        if not events:
            break
        # mostly forward (a pass more often than a failure, a cancel now and then), so runs
        # get long and still repair, exhaust and cancel
        likely = [e for e in events if not isinstance(e, Cancel) and e != Verdict(
            getattr(e, "node", ""), False)] if rng.random() < 0.6 else events
        s = step(graph, s, rng.choice(likely or events))
        out.append(s)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_a_state_with_rows_is_the_state_with_tuples(monkeypatch, seed: int) -> None:
    """The same run with the persistent forms from 2 elements on, and never: every state equal,
    same hash, same summary (a mistake in Row or Bag would show as a different state)."""
    graph = chain(90, 30)
    monkeypatch.setattr(persistent, "SMALL", 2)
    rows = walk(graph, seed, 700)
    monkeypatch.setattr(persistent, "SMALL", 10**9)
    plain = walk(graph, seed, 700)
    assert len(rows) == len(plain) > 150
    assert any(type(s.status) is Row and type(s.passes) is Bag for s in rows)
    assert all(type(s.status) is tuple for s in plain)
    for a, b in zip(rows, plain, strict=True):
        assert a == b and hash(a) == hash(b) and a.summary(graph) == b.summary(graph)
        assert a.census() == b.census()
    assert len({*rows, *plain}) == len(set(plain))


def test_an_old_state_is_not_changed_by_its_successor() -> None:
    graph = chain(100, 0)
    s0 = initial_state(graph)
    s1 = step(graph, s0, Begin("n0"))
    s2 = step(graph, s1, Verdict("n0", True))
    s3 = step(graph, s2, Begin("n1"))
    assert s1.status[0].value == "RUNNING" and s2.status[0].value == "DONE"
    assert s2.status[1].value == "PENDING" and s3.status[1].value == "RUNNING"
    assert ("n0", 0) in s2.passes and ("n0", 0) not in s1.passes


def test_a_long_ledger_replays_to_the_same_state(monkeypatch, tmp_path) -> None:
    """Replay of a 300-node run's ledger: the same state and summary with and without the
    persistent forms."""
    from bench.replay import write_run_ledger
    from loopproof.engine.record.replay import open_replayed

    path = tmp_path / "run.jsonl"
    write_run_ledger(path, 300)
    got = []
    for small in (persistent.SMALL, 10**9):
        monkeypatch.setattr(persistent, "SMALL", small)
        led, replayed = open_replayed(path)
        led.close()
        got.append(replayed)
    fast, plain = got
    assert type(fast.state.status) is Row and type(plain.state.status) is tuple
    assert fast.state == plain.state and fast.summary() == plain.summary()
    assert fast.state.outcome.value == "DONE"
