"""Every operator is held to its own before/after examples, and the families keep their promises."""

from __future__ import annotations

import ast

import pytest
from cosmic_ray.mutating import mutate_code
from hypothesis import given
from hypothesis import strategies as st

from loopproof.engine.audit import mutants
from loopproof.engine.audit.catalogue import Command, Loop
from loopproof.engine.audit.operators import ALL, TIERS, kind_of, tier2
from loopproof.engine.audit.operators import selfattest as sa
from loopproof.engine.audit.operators.tier1 import shape_only
from tests.support.paths import REPO

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


# ---- cosmic-ray's mutants from one parse -------------------------------------------------------

ROOT = REPO
EVERY_KIND = '''def f(xs, flag=True):
    total = 0
    for x in xs:
        if x < 0 and not flag:
            continue
        if x > 10 or x == 3:
            break
        total += -x * 2 - 1
    while total >= 100:
        total //= 2
    return total if flag is True else False
'''


@pytest.mark.parametrize("source", ["model/lifecycle.py", "examples/catalog/he000-full-check/"
                                    "workspace/solution.py", "every-kind"])
def test_cosmic_ray_mutants_from_one_parse_are_its_own(source):
    """`_cosmic_ray` builds every mutant from one parse (operators rewrite nodes in place, and
    the tree is put back after each); it must give exactly cosmic-ray's `mutate_code`, site by
    site. Planted fault: not putting back leaf values (ReplaceBinaryOperator sets node.value)
    made the first cr-comparison mutant of he000 differ."""
    text = EVERY_KIND if source == "every-kind" else (ROOT / source).read_text()
    for group in tier2._CR_GROUPS:
        expected = []
        for _name, op in tier2._cr_operators(group):
            k = 0
            while (m := mutate_code(text, op, k)) is not None:
                expected.append(m)
                k += 1
        assert tier2._cosmic_ray(group, text) == expected, group
        assert expected or group == "cr-loop" or source != "every-kind"


def test_a_drawn_corpus_of_a_large_tree_is_seeded_distinct_and_capped(tmp_path):
    """Above BUILD_WHOLE_BYTES a sampled tier is drawn (never built whole): the same seed gives
    the same mutants, another seed others, the cap holds distinct non-equivalent mutants, and
    the absence mutants of tier 1 are never sampled away."""
    ws = tmp_path / "ws"
    ws.mkdir()
    body = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7} - (x < {i})\n\n"
                   for i in range(1400))  # just above BUILD_WHOLE_BYTES
    (ws / "big.py").write_text(body)
    (ws / "small.py").write_text(EVERY_KIND)
    assert len(body) > mutants.BUILD_WHOLE_BYTES
    loop = Loop("l", "d", ws, ws, ws, Command(("true",), 5.0, True), ("big.py", "small.py"), None)
    ref = mutants.read_reference(loop)
    first = mutants.corpus(loop, ref, 2, 0, 12)
    assert [m.label for m in first] == [m.label for m in mutants.corpus(loop, ref, 2, 0, 12)]
    assert [m.label for m in first] != [m.label for m in mutants.corpus(loop, ref, 2, 1, 12)]
    assert len(first) == 12 and len({m.key for m in first}) == 12
    assert mutants.workspace_key(ref, normalize=True) not in {
        mutants.workspace_key(mutants.apply(ref, m.changes), normalize=True) for m in first}
    assert {m.label.split(":", 1)[1].split("#")[0] for m in first} == {"big.py", "small.py"}
    t1 = mutants.corpus(loop, ref, 1, 0, 3)
    assert {m.operator for m in t1 if m.family == "absence"} >= {"delete", "empty", "filler"}


def test_a_file_with_no_code_gets_no_absence_mutant_of_its_own(tmp_path):
    """A docstring-only `__init__.py` loses nothing when deleted: its absence mutants would be
    equivalent, and a gate accepting them was reported vacuous (planted: without the rule the
    bench tree's sound pytest gate read `vacuous_by: delete, empty, filler`)."""
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text('"""The package."""\nfrom __future__ import annotations\n')
    (ws / "pkg" / "m.py").write_text(EVERY_KIND)
    files = ("pkg/__init__.py", "pkg/m.py")
    loop = Loop("l", "d", ws, ws, ws, Command(("true",), 5.0, True), files, None)
    t1 = mutants.corpus(loop, mutants.read_reference(loop), 1, 0, None)
    absent = {m.label.split("#")[0] for m in t1 if m.family == "absence"}
    assert not any(label.endswith("pkg/__init__.py") for label in absent)
    assert {"delete:*", "empty:*", "delete:pkg/m.py", "empty:pkg/m.py"} <= absent
    assert mutants.holds_no_code("a.py", "") and not mutants.holds_no_code("a.py", "x = 1\n")
    assert not mutants.holds_no_code("a.txt", "")


# ---- the normal form of a Python file, statement by statement ---------------------------------

STATEMENTS = ("x = 1\n", "x = 2\n", "y = x; z = 3\n", "@dec\ndef f(a):\n    return a + 1\n",
              "@other\ndef f(a):\n    return a + 1\n", "def f(a):\n    return a + 1\n",
              "@dec(\n    1)\ndef f(a):\n    return a + 2\n", "# a comment\n\n", "\n",
              "class C:\n    def m(self):\n        return 1\n", "t = (1,\n     2)\n",
              "t = (3,\n     2)\n",
              "s = 1 + \\\n    2\n", "if x:\n    pass\nelse:\n    y = 1\n", "\f\nw = 4\n",
              '"""Doc."""\n', "from __future__ import annotations\n", "async def g():\n    await h()\n")


@given(st.lists(st.sampled_from(STATEMENTS), max_size=8), st.sampled_from(["", "\n", "# end"]))
def test_a_module_s_normal_form_is_its_ast_dump(parts, tail):
    """`python_dump` builds `ast.dump(ast.parse(content))` from statements it has dumped before
    (the same bytes of lines): whatever the layout (decorators, a statement sharing a line,
    comments, continuation lines), it is the same string. Planted: a statement keyed by its
    lines from the `def` on (its decorators left out) was given another's dump, and this test
    failed."""
    content = ("".join(parts) + tail).encode()
    try:
        expected = ast.dump(ast.parse(content))
    except SyntaxError:  # e.g. a __future__ import after a statement
        return
    assert mutants.python_dump(content) == expected
    for coded in (b"# -*- coding: latin-1 -*-\n" + content, content.replace(b"\n", b"\r\n")):
        assert mutants.python_dump(coded) == ast.dump(ast.parse(coded))


def test_every_mutant_of_a_real_module_has_its_ast_dump_as_normal_form():
    """Each tier's mutants of model/lifecycle.py: the normal form from the statement cache (warm
    from the reference and the mutants before) is `ast.dump` of the mutant's parse."""
    text = (ROOT / "model" / "lifecycle.py").read_text()
    assert mutants.python_dump(text.encode()) == ast.dump(ast.parse(text))
    for op in TIERS[1] + TIERS[2]:
        if op.applies_to("lifecycle.py"):
            for variant in op.variants("lifecycle.py", text)[:40]:
                if variant is None:
                    continue
                try:
                    expected = ast.dump(ast.parse(variant))
                except SyntaxError:
                    continue
                assert mutants.python_dump(variant.encode()) == expected, op.name
