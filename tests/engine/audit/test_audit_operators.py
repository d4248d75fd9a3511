"""Every operator is held to its own before/after examples, and the families keep their promises."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopproof.engine.audit.operators import ALL, TIERS, kind_of
from loopproof.engine.audit.operators import selfattest as sa
from loopproof.engine.audit.operators.tier1 import shape_only

EXAMPLES = [(op, ex) for op in ALL for ex in op.examples]


@pytest.mark.parametrize(("op", "example"), EXAMPLES,
                         ids=[f"{op.name}-{i}" for i, (op, _) in enumerate(EXAMPLES)])
def test_operator_yields_its_example(op, example):
    assert op.applies_to(example.path)
    assert example.after in op.variants(example.path, example.before)


def test_every_operator_has_examples_and_a_unique_name():
    names = [op.name for op in ALL]
    assert len(names) == len(set(names))
    assert all(op.examples for op in ALL)


def test_tier_two_is_held_out_and_never_destroying_by_construction():
    assert {op.name for op in TIERS[1]}.isdisjoint({op.name for op in TIERS[2]})
    assert not any(op.destroys_by_construction for op in TIERS[2])
    assert all(op.destroys_by_construction for op in TIERS[1] if op.family == "absence")
    assert {op.family for op in TIERS[2]} == {"semantic", "content"}


def test_variants_never_include_the_unchanged_file():
    text = "def f(a):\n    return a + 1 < 3\n"
    for op in ALL:
        if op.applies_to("x.py"):
            assert text not in op.variants("x.py", text), op.name


@pytest.mark.parametrize("example", sa.MARKER_EXAMPLES)
def test_marker_lines(example):
    assert sa.marker_lines(example.before) == example.after


@pytest.mark.parametrize("example", sa.NEGATE_EXAMPLES)
def test_negate(example):
    assert sa.negate(example.path, example.before) == example.after


@pytest.mark.parametrize("example", sa.FIELD_EXAMPLES)
def test_field_negation(example):
    assert example.after in [text for _, text in sa.field_negations(example.path, example.before)]


def test_no_marker_in_plain_code():
    assert sa.marker_lines("def f():\n    return 1  # the answer\n") is None


def test_kind_of():
    assert [kind_of(p) for p in ("a.py", "b.JSON", "c.md", "d.csv", "e")] == [
        "python", "json", "markdown", "csv", "text"]


names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)


@given(st.lists(names, min_size=1, max_size=4, unique=True), st.integers(0, 3))
def test_shape_only_keeps_every_signature_and_drops_every_statement(funcs, depth):
    source = "".join(f'def {n}(x):\n    """Doc {n}."""\n' + "    y = x\n" * (depth + 1)
                     + "    return y\n\n" for n in funcs)
    for variant in shape_only.variants("m.py", source):
        tree = ast.parse(variant)
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert [d.name for d in defs] == funcs
        for d in defs:
            assert ast.get_docstring(d) == f"Doc {d.name}."
            assert not any(isinstance(s, ast.Return | ast.Assign) for s in d.body)
