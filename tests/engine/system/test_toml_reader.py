"""engine/system/toml_reader.py answers exactly as tomllib: the same table (values, types, key
order, float bits) or the same error message, for documents built to stress the part-by-part
fast path (cuts inside strings and arrays, tables defined twice or reopened across parts, keys
that collide with the root's, TOML 1.1 syntax tomllib refuses) and for their mutations."""

from __future__ import annotations

import math
import struct
import tomllib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.engine.system import toml_reader


def shape(x: Any) -> Any:
    """A value with its types, key order and float bits made comparable."""
    if isinstance(x, dict):
        return ("table", [(k, shape(v)) for k, v in x.items()])
    if isinstance(x, list):
        return ("array", [shape(v) for v in x])
    if isinstance(x, float):
        return ("float", "nan" if math.isnan(x) else struct.pack("<d", x))
    return (type(x).__name__, repr(x))


def outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "table", shape(parse(text))
    except tomllib.TOMLDecodeError as exc:
        return "error", str(exc)


def same_as_tomllib(text: str) -> None:
    assert outcome(toml_reader.loads, text) == outcome(tomllib.loads, text), text


SPEC = ('[graph]\nspend_budget = 1e12\nrepair_budget = 3\n'
        + "".join(f'[node.n{i}]\nworker = ["true"]\ngate = ["true", "-x"]\nspend_ceiling = 1.5\n'
                  f'attempts = {1 + i % 3}\nneeds = {[f"n{i - 1}"] if i else []}\n'
                  f'repairs = ["n{max(0, i - 5)}"]\n'.replace("'", '"') for i in range(50)))


@pytest.mark.parametrize("batch", [1, 7, 512])
def test_a_spec_takes_the_fast_path_and_reads_the_same(monkeypatch, batch) -> None:
    monkeypatch.setattr(toml_reader, "_BATCH", batch)  # tables per rtoml call
    assert toml_reader._by_tables(SPEC) is not None  # else large specs are slow again
    same_as_tomllib(SPEC)


def batched(batch: int, text: str) -> None:
    """`same_as_tomllib` with `batch` top-level tables per rtoml call (a cut inside a string or
    an array must be caught whether it falls inside one call or between two)."""
    saved = toml_reader._BATCH
    toml_reader._BATCH = batch
    try:
        same_as_tomllib(text)
    finally:
        toml_reader._BATCH = saved


BATCHES = st.sampled_from([1, 2, 3, 512])


HOSTILE = [
    # TOML 1.1, which rtoml reads and tomllib refuses
    'a = "\\e"\n', 'a = "\\x41"\n', 'a = {b = 1,}\n', 'a = {\nb = 1}\n', 'a = 07:32\n',
    'a = 1979-05-27T07:32Z\n',
    # CRLF inside a multi-line string (rtoml folds it), and as the line ending
    'a = """x\r\ny"""\n', '[a]\r\nb = 1\r\n[c]\r\nd = 2\r\n',
    # a cut inside a multi-line string or array
    'a = """\n[b]\nc = 1\n"""\n', "a = '''\n[b]\n'''\n", 'a = [\n[1], [2]\n]\n[b]\nc = 1\n',
    '[x]\na = """\n[x]\n"""\n[y]\n', '[x]\na = [\n[1]\n]\n',
    # tables defined twice or reopened across parts
    '[a]\nb = 1\n[a]\nc = 2\n', '[a.b]\nc = 1\n[a]\nd = 2\n', '[a]\nb.c = 1\n[a.b]\nd = 2\n',
    '[a]\nb = 1\n[a.b]\nc = 2\n', '[a]\n[a.b]\n', '[a.b]\n[a.b.c]\n', '[a.b]\n[a.c]\n',
    '[ a . b ]\n[a.b]\n', '["a"]\n[a]\n', "['a.b']\n[a.b]\n", '["a.b"]\nx = 1\n[a]\n',
    # root keys against headers
    'a = 1\n[a]\n', 'a.b = 1\n[a.c]\n', 'a = 1\n[b]\n', 'x = [\n[1]]\n',
    # headers hidden by indentation, arrays of tables
    '[a]\n  [b]\nc = 1\n[b]\n', '[a]\n  [a.b]\n[a.b]\n', '[a]\n  [a.b]\nx = 1\n[c]\n',
    '[[a]]\nb = 1\n[[a]]\nb = 2\n', '[a]\n[[a.b]]\n[[a.b]]\n', '[[a]]\n[a]\n',
    # values: big integers, dates, special floats, odd bytes, comments, empty documents
    'a = 99999999999999999999\n', 'a = 1979-05-27\n[b]\n', 'a = 1979-05-27T07:32:00Z\n',
    'a = nan\nb = -inf\nc = -0.0\nd = 5e-324\ne = 1.7976931348623157e308\n',
    'a = 0x_1\n', 'a = 01\n', 'a = 1__0\n', 'a = "\x00"\n', 'a = "\x7f"\n', 'a = "é"\n',
    '\ufeff[a]\n', '[a] # c\n[b]#c\nx = 1 #c\n', '', '\n', '#\n', '[a]', '[a]\nb = 1',
    '[a] x = 1\n', '[a\n', '[]\n', '[a.]\n', '[.a]\n', '[a..b]\n', '[a b]\n', '[ "" ]\n',
    "[a.'']\n", '[a."b".c]\nx = 1\n[a.d]\n', 'a = 1\na = 2\n', '[a]\nb = 1\nb = 2\n',
]


@pytest.mark.parametrize("batch", [1, 2, 512])
@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_documents_read_as_tomllib_reads_them(text: str, batch: int) -> None:
    batched(batch, text)


bare = st.text("abcxyz_-019", min_size=1, max_size=3)
key = st.one_of(bare, bare.map(lambda k: f'"{k}"'), bare.map(lambda k: f"'{k}.q'"),
                st.sampled_from(['""', "a b", '"a.b"']))
scalar = st.one_of(
    st.integers(-(2**70), 2**70).map(str), st.sampled_from(["0x1f", "0o7", "0b1", "1_000", "+1"]),
    st.floats(allow_nan=True).map(lambda f: repr(f).replace("inf", "inf")),
    st.sampled_from(["1e12", "-0.0", "6.626e-34", "+inf", "nan", "true", "false",
                     "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z"]),
    st.text("ab [].=#'\n", max_size=6).map(lambda s: '"""' + s + '"""'),
    st.text("ab [].=#\"", max_size=6).map(lambda s: "'" + s + "'"),
    st.text("ab [].=#", max_size=6).map(lambda s: '"' + s + '"'))
value = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3).map(
    lambda xs: "[\n" + ",\n".join(xs) + "\n]" if len(xs) > 1 else "[" + ", ".join(xs) + "]"),
    max_leaves=5)
line = st.one_of(
    st.tuples(st.lists(key, min_size=1, max_size=2), value).map(
        lambda kv: ".".join(kv[0]) + " = " + kv[1]),
    st.sampled_from(["# a comment", "", "  [a]", "  [[b]]", "[[t]]"]))
header = st.lists(key, min_size=1, max_size=3).map(lambda ks: "[" + ".".join(ks) + "]")
document = st.tuples(st.lists(line, max_size=3),
                     st.lists(st.tuples(header, st.lists(line, max_size=4)), max_size=6)).map(
    lambda d: "\n".join([*d[0], *(h + "\n" + "\n".join(body) for h, body in d[1])]) + "\n")


@settings(max_examples=150)  # `make fuzz` draws more
@given(document, BATCHES)
def test_generated_documents_read_as_tomllib_reads_them(text: str, batch: int) -> None:
    batched(batch, text)


@settings(max_examples=max(150, settings.default.max_examples))  # ci 150 (was 400), fuzz 300
@given(st.data())
def test_mutated_specs_read_as_tomllib_reads_them(data: st.DataObject) -> None:
    text = SPEC[:data.draw(st.integers(200, len(SPEC)))]
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 2))
        text = text[:at] + data.draw(st.sampled_from(
            ["", "[", "]", "\n[", "\n", '"', "'", '"""', "=", ".", "[a]\n", "[node]\n",
             "[node.n1]\n", "x = 1\n", "  ", "#", ",", "\\e", "{", "\r", "1979-05-27",
             "07:32:00"])) + text[at + cut:]
    batched(data.draw(BATCHES), text)
