"""The one field mechanism (engine/system/fields.py), attacked as a careless spec would: an unknown
key, a value of the wrong type, a number out of range, a required field left out; defaults filled
in and never shared into the table as written; the first error a bad table gets always the same
one (declaration order, whatever else is wrong after it); a declaration whose own default fails
its validator refused when declared."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.fields import (
    ABSENT,
    Field,
    Refusal,
    Table,
    bad_input,
    boolean,
    dotted,
    integer,
    one_of,
    strings,
)

SHIP = Table("[ship]", (
    Field("name", "a list of strings", "what it is called", strings(), '["Argo"]'),
    Field("crew", "an integer from 1 to 50", "how many sail", integer(1, 50), "12", default=1),
    Field("speed", "one of slow, fast", "how it goes", one_of(("slow", "fast")),
          fix='write speed = "slow" (or leave it out)', default="slow"),
    Field("armed", "true or false", "whether it carries arms", boolean, default=False),
    Field("port", "a list of strings", "where it calls", strings(empty=True), default=ABSENT),
))
GOOD = {"name": ["Argo"], "crew": 12, "speed": "fast", "armed": True}


def read(raw: dict, table: Table = SHIP) -> dict:
    return table.read(raw, bad_input("ship.toml", "[ship] {}"))


def refusal(raw: dict, table: Table = SHIP) -> BadInput:
    with pytest.raises(BadInput) as info:
        read(raw, table)
    return info.value


def test_an_unknown_key_names_the_table_the_key_and_every_allowed_key() -> None:
    err = refusal({**GOOD, "crw": 3})
    assert err.file == "ship.toml" and err.field == "[ship] crw"
    assert err.problem == "is not a field of [ship]"
    assert err.fix == "did you mean 'crew'? use one of: name, crew, speed, armed, port"
    far = refusal({**GOOD, "zzz": 1})
    assert far.fix == "use one of: name, crew, speed, armed, port"
    assert str(far).count("\n") == 0


def test_an_unknown_key_is_named_before_any_bad_value_and_titled_as_asked() -> None:
    with pytest.raises(BadInput) as info:
        SHIP.read({"crew": "x", "oops": 1}, bad_input("f", "{}"), title="[ship.argo]")
    assert info.value.field == "oops" and info.value.problem == "is not a field of [ship.argo]"


def test_a_value_of_the_wrong_type_gets_the_validators_words_and_the_fields_fix() -> None:
    err = refusal({**GOOD, "armed": "yes"})
    assert (err.field, err.problem) == ("[ship] armed", "must be true or false, got 'yes'")
    assert err.fix == "give armed true or false"  # no example, no fix: said from `holds`
    speed = refusal({**GOOD, "speed": 3})
    assert speed.problem == "must be one of ['slow', 'fast'], got 3"
    assert speed.fix == 'write speed = "slow" (or leave it out)'


def test_a_number_out_of_range_is_refused_with_its_range() -> None:
    for crew in (0, 51, 10**30, True, 3.0):
        err = refusal({**GOOD, "crew": crew})
        assert err.field == "[ship] crew" and "from 1 to 50" in err.problem, crew
        assert err.fix == "write crew = 12"
    assert read({**GOOD, "crew": 50})["crew"] == 50


def test_a_required_field_left_out_says_how_to_add_it_to_which_table() -> None:
    err = refusal({"crew": 3})
    assert (err.field, err.problem) == ("[ship] name", "is missing")
    assert err.fix == 'add name = ["Argo"] to [ship]'
    with pytest.raises(BadInput) as info:
        SHIP.read({}, bad_input("f", "{}"), title="[ship.argo]")
    assert info.value.fix == 'add name = ["Argo"] to [ship.argo]'


def test_defaults_are_filled_in_and_the_table_as_written_is_left_alone() -> None:
    raw = {"name": ["Argo"]}
    got = read(raw)
    assert got == {"name": ["Argo"], "crew": 1, "speed": "slow", "armed": False}
    assert "port" not in got  # ABSENT: left out, not filled in
    assert raw == {"name": ["Argo"]}  # not written into
    got["crew"] = 7
    assert read({"name": ["B"]})["crew"] == 1  # the declaration's default is not shared


def test_a_refusal_can_name_the_part_at_fault_and_its_own_fix() -> None:
    def env(v: object) -> Refusal | None:
        return Refusal("is set by the engine", "remove it", "env.PATH") if v else None

    t = Table("[node.a]", (Field("env", "a table", "variables", env, default=ABSENT),))
    with pytest.raises(BadInput) as info:
        t.read({"env": {"PATH": "/"}}, bad_input("g.toml", "node 'a', field {!r}"))
    assert str(info.value) == ("g.toml: node 'a', field 'env.PATH': is set by the engine; "
                               "fix: remove it")


def test_a_default_that_fails_its_own_validator_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="the default of crew fails its own check"):
        Table("[bad]", (Field("crew", "an integer from 1 to 50", "", integer(1, 50), default=0),))
    with pytest.raises(ValueError, match="declared twice"):
        Table("[bad]", (Field("a", "", ""), Field("a", "", "")))


BAD_VALUES = {"name": 3, "crew": 0, "speed": "warp", "armed": "no", "port": "x"}
ORDER = [f.name for f in SHIP]


@given(st.sets(st.sampled_from(ORDER), min_size=1), st.booleans(), st.randoms())
def test_the_first_error_is_the_first_bad_field_in_declaration_order(bad, drop_name,
                                                                     rnd) -> None:
    """Whatever else is wrong, and in whatever order the keys were written, a bad table's
    error names the first field (in declaration order) that is bad or, if required, missing."""
    raw = {**GOOD, **{k: BAD_VALUES[k] for k in bad}}
    if drop_name:
        raw.pop("name")
    keys = list(raw)
    rnd.shuffle(keys)
    shuffled = {k: raw[k] for k in keys}
    wrong = set(bad) | ({"name"} if drop_name else set())
    first = next(name for name in ORDER if name in wrong)
    assert refusal(shuffled).field == f"[ship] {first}"


@given(st.lists(st.sampled_from(["zz", "crw", "nme", "q"]), min_size=1, unique=True),
       st.sets(st.sampled_from(ORDER)))
def test_an_unknown_key_wins_over_every_bad_value_and_the_first_written_is_named(unknown,
                                                                                 bad) -> None:
    raw = {**{k: 1 for k in unknown}, **GOOD, **{k: BAD_VALUES[k] for k in bad}}
    assert refusal(raw).field == f"[ship] {unknown[0]}"


def test_the_docs_table_has_a_row_per_field_in_declaration_order() -> None:
    rows = SHIP.markdown().splitlines()
    assert rows[:2] == ["| field | holds | default | what it is |", "|---|---|---|---|"]
    assert rows[2:] == [
        '| `name` | a list of strings | required | what it is called |',
        '| `crew` | an integer from 1 to 50 | `1` | how many sail |',
        '| `speed` | one of slow, fast | `"slow"` | how it goes |',
        '| `armed` | true or false | `false` | whether it carries arms |',
        '| `port` | a list of strings | none | where it calls |',
    ]


def test_a_files_tables_read_as_one_with_dotted_names() -> None:
    inner = Table("[crew]", (Field("size", "an integer", "", integer(1)),), prefix="crew.")
    flat = dotted("ship.toml", [SHIP, inner])
    assert [f.name for f in flat][-1] == "crew.size" and flat.title == "ship.toml"
    with pytest.raises(BadInput) as info:
        inner.read({"size": 0}, bad_input("s.toml"))
    assert info.value.field == "crew.size"
