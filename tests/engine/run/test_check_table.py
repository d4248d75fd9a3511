"""engine/run/values.py `check_table` refuses what it refused before it screened the JSON text
first: a NUL byte in any string or key, an integer beyond 64 bits, anywhere in a large table
(the screen must never let one through), with the same line naming the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopproof.engine.run import values
from loopproof.engine.system.errors import BadInput


def outcome(table: object) -> str:
    try:
        values.check_table(table, "graph.toml")
    except BadInput as exc:
        return str(exc)
    return "ok"


def walked(table: object, monkeypatch: pytest.MonkeyPatch) -> str:
    """The outcome with the screen switched off: the walk runs on every table."""
    with monkeypatch.context() as m:
        m.setattr(values, "_nothing_to_find", lambda text: False)
        return outcome(table)


def big_spec(hide: tuple[str, object] | None = None, at: int = 8_000) -> dict:
    nodes = {f"n{i}": {"worker": ["true"], "gate": ["true", "-x"], "spend_ceiling": 0.5,
                       "attempts": 1 + i % 3, "needs": [f"n{i - 1}"] if i else []}
             for i in range(10_000)}
    if hide is not None:
        nodes[f"n{at}"][hide[0]] = hide[1]
    return {"graph": {"spend_budget": 1e12}, "node": nodes}


@pytest.mark.parametrize(("field", "value", "words"), [
    ("gate", ["true", "a\x00b"], "'node.n8000.gate[1]': holds a NUL byte"),
    ("needs", [1 << 63], "'node.n8000.needs[0]': integer 9223372036854775808 does not fit"),
    ("attempts", -(1 << 63) - 1, "'node.n8000.attempts': integer -9223372036854775809 does"),
    ("table", {"k\x00": 1}, "'node.n8000.table': a key holds a NUL byte"),
])
def test_one_bad_value_in_a_large_table_is_found_and_named(field, value, words) -> None:
    assert words in outcome(big_spec((field, value)))


@pytest.mark.parametrize("value", [(1 << 63) - 1, -(1 << 63), 10**18, 0.00012345678901234567,
                                   "a\\u0000b", "1234567890123456789012"])
def test_what_only_looks_bad_is_accepted(value) -> None:
    """A 19-digit run or an escaped-looking text makes the walk run; it finds nothing."""
    assert outcome(big_spec(("extra", value))) == "ok"


def test_a_clean_large_table_is_screened_without_the_walk(monkeypatch) -> None:
    """The point of the screen: a 10,000-node table with nothing wrong is not walked."""
    def no_walk(*args: object) -> None:
        raise AssertionError("walked")
    monkeypatch.setattr(values, "_no_json_form", no_walk)
    seen: list[str] = []
    real = values._nothing_to_find
    monkeypatch.setattr(values, "_nothing_to_find", lambda t: seen.append("x") or real(t))
    assert outcome(big_spec()) == "ok" and seen == ["x"]


scalar = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
                   st.booleans(), st.text(st.sampled_from("ab\x00\\u0139"), max_size=6))
key = st.text(st.sampled_from("ab\x00\\u"), min_size=1, max_size=4)
tables = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(key, inner, max_size=3)), max_leaves=12)


@given(st.dictionaries(key, tables, max_size=4))
def test_the_screen_changes_no_outcome(table) -> None:
    with pytest.MonkeyPatch.context() as m:
        expected = walked(table, m)
    assert outcome(table) == expected
