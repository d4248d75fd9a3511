"""Tier 2, the held-out family: never consulted while gates are repaired. Semantic code mutants
come from cosmic-ray used as a library; text and data get content negations and boundary changes.
Nothing here is wrong by construction: a variant is destroying only when the oracle rejects it."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections.abc import Iterator
from functools import cache, lru_cache

from cosmic_ray.ast import ast_nodes, get_ast
from cosmic_ray.plugins import get_operator, operator_names
from parso.utils import split_lines

from loopproof.engine.audit.operators.base import Example, FunctionOperator, Operator, operator

# cosmic-ray operators that pick nothing at random (VariableReplacer/Inserter do), grouped so that
# each group carries an example.
_CR_GROUPS = {
    "cr-binary": ("core/ReplaceBinaryOperator_",),
    "cr-comparison": ("core/ReplaceComparisonOperator_",),
    "cr-unary": ("core/ReplaceUnaryOperator_", "core/AddNot"),
    "cr-boolean": ("core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue",
                   "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd"),
    "cr-number": ("core/NumberReplacer",),
    "cr-loop": ("core/ZeroIterationForLoop", "core/ReplaceBreakWithContinue",
                "core/ReplaceContinueWithBreak"),
}


@cache
def _cr_operators(group: str) -> tuple[tuple[str, object], ...]:
    prefixes = _CR_GROUPS[group]
    return tuple((name, get_operator(name)()) for name in sorted(operator_names())
                 if name.startswith(prefixes))


@lru_cache(maxsize=32)
def _parsed(text: str) -> tuple[object, list, list[int], dict]:
    """One parse of `text` (parso, as cosmic-ray parses): the tree, its nodes in pre-order, the
    offset in `text` at which each of parso's lines starts, and the positions found so far at
    each node (`_at`)."""
    compile(text, "<artifact>", "exec")  # not Python: no mutant (SyntaxError)
    tree = get_ast(text)
    starts = [0]
    for line in split_lines(text, keepends=True)[:-1]:
        starts.append(starts[-1] + len(line))
    return tree, list(ast_nodes(tree)), starts, {}


def _at(text: str, n: int, group: str) -> list[tuple[object, int]]:
    """The group's (operator, index) positions at node `n` of `text`'s parse, in cosmic-ray's
    operator order; asked once per node and group (a group with no site in a large module,
    drawn again for another tier, seed or loop, would look at every node again)."""
    _, nodes, _, seen = _parsed(text)
    if group not in seen:  # nodes looked at (one byte each), and those with a position
        seen[group] = (bytearray(len(nodes)), {})
    looked, found = seen[group]
    if not looked[n]:
        here = [(op, index) for _name, op in _cr_operators(group)
                for index, _ in enumerate(op.mutation_positions(nodes[n]))]
        if here:
            found[n] = here
        looked[n] = 1
    return found.get(n, [])


def _mutate(text: str, op: object, n: int, index: int) -> str | None:
    """The text cosmic-ray's `mutate_code(text, op, occurrence)` gives for the position `index`
    of node `n` (pre-order) that is `op`'s occurrence-th, from the one parse: the positions a
    pre-order walk meets before it lie in the unmutated tree, so the mutant is that tree with
    that one node replaced by `op.mutate(node, index)`. Operators rewrite nodes in place (a
    leaf's value, a node's children), so everything under the node, and its parent's
    children, are put back before the next one is built.
    tests/engine/audit/test_audit_operators.py holds this equal to `mutate_code` at every
    site."""
    tree, nodes, starts, _ = _parsed(text)
    node = nodes[n]
    parent = node.parent
    saved = [(x, "children", list(x.children)) if hasattr(x, "children")
             else (x, "value", x.value) for x in ast_nodes(node)]
    saved += [(x, "prefix", x.prefix) for x in ast_nodes(node) if not hasattr(x, "children")]
    if parent is not None:
        saved.append((parent, "children", list(parent.children)))
    # where the node's code (its first leaf's prefix included) lies in `text`: the mutant is
    # `text` with that span replaced, no walk of the whole tree for its code
    (line, col), (end_line, end_col) = node.get_first_leaf().get_start_pos_of_prefix(), \
        node.end_pos
    a, b = starts[line - 1] + col, starts[end_line - 1] + end_col
    spliced = text[a:b] == node.get_code()
    try:
        mutated = op.mutate(node, index)  # type: ignore[attr-defined]  # a cosmic-ray Operator (untyped)
        if parent is None:
            return mutated.get_code() if mutated is not None else ""
        if spliced:
            return text[:a] + (mutated.get_code() if mutated is not None else "") + text[b:]
        at = next(k for k, child in enumerate(parent.children) if child is node)
        parent.children = parent.children[:at] + ([mutated] if mutated is not None else []) \
            + parent.children[at + 1:]
        return tree.get_code()
    except Exception:  # noqa: BLE001 - a parso corner case is not a mutant
        return None
    finally:
        for obj, attr, value in reversed(saved):
            setattr(obj, attr, value)


def _cosmic_ray(group: str, text: str) -> list[str | None]:
    """Every mutant of `text` by the group's operators, operator by operator, occurrence by
    occurrence (cosmic-ray's order), from one parse of the text (`_mutate`; a parse per mutant
    made about 4,000 parses of a 770-line module). An operator that fails once yields nothing more
    (as `mutate_code`'s loop did)."""
    try:
        _, nodes, _, _ = _parsed(text)
    except Exception:  # noqa: BLE001 - not Python, or a parso corner case: no mutant
        return []
    out: list[str | None] = []
    for _name, op in _cr_operators(group):
        for n, node in enumerate(nodes):
            for index, _ in enumerate(op.mutation_positions(node)):
                mutant = _mutate(text, op, n, index)
                if mutant is None:
                    break
                out.append(mutant)
            else:
                continue
            break
    return out


class CosmicRay(FunctionOperator):
    """A cosmic-ray group. Drawn, it visits the parse's nodes in a seeded order and builds the
    mutants at each (counting every site of a 700-line module first costs ~200 operator calls
    per node, for nothing)."""

    group: str

    def draw(self, path: str, text: str, rng: random.Random) -> Iterator[tuple[str, str | None]]:
        try:
            _, nodes, _, _ = _parsed(text)
        except Exception:  # noqa: BLE001 - not Python: no mutant
            return
        for n in rng.sample(range(len(nodes)), len(nodes)):
            for k, (op, index) in enumerate(_at(text, n, self.group)):
                yield f"{n}.{k}", _mutate(text, op, n, index)


def _cr_operator(group: str, example: Example) -> Operator:
    def fn(path: str, text: str) -> list[str | None]:
        return _cosmic_ray(group, text)

    op = CosmicRay(fn, name=group, tier=2, family="semantic", kinds=("python",),
                   destroys_by_construction=False, examples=(example,),
                   doc=f"cosmic-ray {', '.join(_CR_GROUPS[group])} at every occurrence")
    object.__setattr__(op, "group", group)
    return op


COSMIC_RAY = (
    _cr_operator("cr-binary", Example("def f(a, b):\n    return a + b\n",
                                      "def f(a, b):\n    return a - b\n", "a.py")),
    _cr_operator("cr-comparison", Example("def f(a):\n    return a < 3\n",
                                          "def f(a):\n    return a <= 3\n", "a.py")),
    _cr_operator("cr-unary", Example("def f(a):\n    return -a\n",
                                     "def f(a):\n    return +a\n", "a.py")),
    _cr_operator("cr-boolean", Example("def f(a, b):\n    return a and b\n",
                                       "def f(a, b):\n    return a or b\n", "a.py")),
    _cr_operator("cr-number", Example("def f():\n    return 2\n",
                                      "def f():\n    return 3\n", "a.py")),
    _cr_operator("cr-loop", Example("def f(xs):\n    for x in xs:\n        break\n",
                                    "def f(xs):\n    for x in []:\n        break\n", "a.py")),
)

_NEGATABLE = re.compile(r"\b(must|should|is|are|will|can)\b(?! not)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_INT = re.compile(r"(?<!\d)(\d+)(?!\d)")


@operator(name="negate-claim", tier=2, family="content", kinds=("markdown", "text"),
          by_construction=False,
          examples=(Example("The port must be open.\n", "The port must not be open.\n", "a.md"),))
def negate_claim(path: str, text: str) -> list[str | None]:
    """One sentence at a time says the opposite ("must" -> "must not")."""
    return [text[:m.end()] + " not" + text[m.end():] for m in _NEGATABLE.finditer(text)]


@operator(name="break-link", tier=2, family="content", kinds=("markdown",), by_construction=False,
          examples=(Example("See [docs](https://x.org/a).\n", "See [docs]().\n", "a.md"),))
def break_link(path: str, text: str) -> list[str | None]:
    """One link at a time loses its target."""
    return [text[:m.start(1)] + text[m.end(1):] for m in _LINK.finditer(text)]


@operator(name="drop-line", tier=2, family="content", kinds=("markdown", "text", "csv"),
          by_construction=False,
          examples=(Example("# A\n- one\n- two\n", "# A\n- two\n", "a.md"),))
def drop_line(path: str, text: str) -> list[str | None]:
    """One content line (a bullet, a row, a sentence) at a time removed; headings stay."""
    lines = text.splitlines(keepends=True)
    return ["".join(lines[:i] + lines[i + 1:]) for i, line in enumerate(lines)
            if line.strip() and not line.lstrip().startswith("#")]


@operator(name="number-boundary", tier=2, family="content", kinds=("markdown", "text", "csv"),
          by_construction=False,
          examples=(Example("v1.2\n", "v0.2\n", "a.md"), Example("v1.2\n", "v2.2\n", "a.md")))
def number_boundary(path: str, text: str) -> list[str | None]:
    """Each integer in the text moved by one, either way: off-by-one versions, dates, limits."""
    out: list[str | None] = []
    for m in _INT.finditer(text):
        n = int(m.group(1))
        for k in (n - 1, n + 1):
            if k >= 0:
                out.append(text[:m.start(1)] + str(k).zfill(len(m.group(1))) + text[m.end(1):])
    return out


def _json_paths(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _json_paths(v, (*path, i))


def _replaced(data, path, new):
    if not path:
        return new
    out = dict(data) if isinstance(data, dict) else list(data)
    out[path[0]] = _replaced(data[path[0]], path[1:], new)
    return out


def _removed(data, path):
    if len(path) == 1:
        out = dict(data) if isinstance(data, dict) else list(data)
        del out[path[0]]
        return out
    return _replaced(data, path[:1], _removed(data[path[0]], path[1:]))


@operator(name="json-boundary", tier=2, family="content", kinds=("json",), by_construction=False,
          examples=(Example('{"port": 80, "tls": true}', '{\n  "port": 79,\n  "tls": true\n}\n', "a.json"),
                    Example('{"port": 80, "tls": true}', '{\n  "port": 80,\n  "tls": false\n}\n', "a.json"),
                    Example('{"name": "x"}', '{\n  "name": ""\n}\n', "a.json"),
                    Example('{"a": 1, "b": 2}', '{\n  "b": 2\n}\n', "a.json")))
def json_boundary(path: str, text: str) -> list[str | None]:
    """One value at a time: numbers +-1 and negated, booleans flipped, strings blanked, keys and
    list items dropped."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    out: list[str | None] = []
    for where, value in _json_paths(data):
        if not where:
            continue
        news = []
        if isinstance(value, bool):
            news = [not value]
        elif isinstance(value, int | float):
            news = [value - 1, value + 1, -value if value else -1]
        elif isinstance(value, str):
            news = [""] if value else ["x"]
        for new in news:
            out.append(json.dumps(_replaced(data, where, new), indent=2) + "\n")
        out.append(json.dumps(_removed(data, where), indent=2) + "\n")
    return out


@operator(name="csv-cell", tier=2, family="content", kinds=("csv",), by_construction=False,
          examples=(Example("id,qty\n1,5\n", "id,qty\n1,4\n", "a.csv"),
                    Example("id,qty\n1,5\n", "id,qty\n1,\n", "a.csv"),
                    Example("id,qty\n1,5\n2,6\n", "id,qty\n1,5\n1,5\n2,6\n", "a.csv")))
def csv_cell(path: str, text: str) -> list[str | None]:
    """One data cell at a time: numbers +-1 and negated, cells blanked; a row duplicated."""
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2:
        return []

    def render(table):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(table)
        return buf.getvalue()

    out: list[str | None] = []
    for r in range(1, len(rows)):
        for c, cell in enumerate(rows[r]):
            news = []
            try:
                number = float(cell)
                whole = number.is_integer() and "." not in cell
                fmt = (lambda x: str(int(x))) if whole else (lambda x: repr(round(x, 6)))
                news = [fmt(number - 1), fmt(number + 1), fmt(-number if number else -1)]
            except ValueError:
                pass
            news.append("")
            for new in news:
                table = [list(row) for row in rows]
                table[r][c] = new
                out.append(render(table))
    out.append(render(rows[:2] + rows[1:]))
    return out


OPERATORS: tuple[Operator, ...] = (*COSMIC_RAY, negate_claim, break_link, drop_line,
                                   number_boundary, json_boundary, csv_cell)
