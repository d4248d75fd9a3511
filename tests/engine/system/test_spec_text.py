"""tests/support/specs.py writes what the engine reads: any table of values a test may give
(strings with quotes, backslashes, newlines and non-ASCII, integers, binary-fraction floats,
booleans, lists, sub-tables, node names that need quoting) comes back from the engine's TOML
reader (engine/system/toml_reader.py, tomllib's answers) as the same values. Without it a
builder that quoted one character wrong would write a spec other than the one its test means."""

from __future__ import annotations

import tomllib

from hypothesis import given
from hypothesis import strategies as st

from loopproof.engine.system import toml_reader
from tests.support.specs import spec_text

keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)
scalars = st.one_of(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8),
                    st.integers(-(2**63), 2**63 - 1), st.booleans(),
                    st.integers(-64, 64).map(lambda i: i / 8))
values = st.one_of(scalars, st.lists(st.text(max_size=5), max_size=3),
                   st.lists(st.integers(-9, 9), max_size=3))
tables = st.dictionaries(keys, values, max_size=4)


@given(st.dictionaries(keys, st.one_of(tables, tables.map(lambda t: {**t, "llm": {"k": "v"}})),
                       max_size=3), tables)
def test_what_spec_text_writes_the_reader_reads_as_the_same_values(nodes, graph) -> None:
    text = spec_text(nodes, **graph)
    want = {"graph": graph, **({"node": nodes} if nodes else {})}
    assert toml_reader.loads(text) == want == tomllib.loads(text)


def test_a_string_toml_would_misread_is_written_so_it_is_read_back() -> None:
    tricky = 'a "quoted" \\ back\nslash \u00e9 \t tab \'single\''
    text = spec_text({"n.1 x": {"worker": ["sh", "-c", tricky]}}, sandbox="none")
    assert toml_reader.loads(text)["node"]["n.1 x"]["worker"][2] == tricky
