"""The edit family shared by the mutant generator and the offline repair coder.

Why one family for both: a wrong start is one edit away from the reference, and the coder searches
the same family, so a repair is always reachable in one step when the coder is told which test to
aim at. Edits act only inside the task's entry-point function (its docstring excluded):

- operator swaps (arithmetic, comparison, boolean), each with its inverse in the table;
- constant changes (an int c becomes c + 1 or c - 1; True and False swap);
- boundary changes (an argument of `range(...)` or a slice bound x becomes x + 1 or x - 1);
- statement deletions (a statement in a block of two or more);
- restorations (a hunk of an earlier state of the same trajectory put back; see `restorations`).

Each kind carries its before/after example in `EXAMPLES`, which the tests check.
"""

from __future__ import annotations

import ast
import copy
import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

BIN_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Add, ast.FloorDiv),
    ast.FloorDiv: (ast.Mult, ast.Mod, ast.Div), ast.Div: (ast.FloorDiv,), ast.Mod: (ast.FloorDiv,),
}
CMP_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,),
    ast.In: (ast.NotIn,), ast.NotIn: (ast.In,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
}
BOOL_SWAPS: dict[type, tuple[type, ...]] = {ast.And: (ast.Or,), ast.Or: (ast.And,)}

# kind -> (before, after) inside `def f(x):`; tests/experiments/transition/test_transition_metrics.py checks each pair.
EXAMPLES: dict[str, tuple[str, str]] = {
    "operator": ("return x + 1", "return x - 1"),
    "compare": ("return x < 1", "return x <= 1"),
    "boolean": ("return x and 1", "return x or 1"),
    "constant": ("return x + 1", "return x + 2"),
    "boundary": ("return list(range(x))", "return list(range(x + 1))"),
    "delete": ("y = 1\n    return x", "return x"),
}


@dataclass(frozen=True)
class Edit:
    kind: str
    where: str   # e.g. "node 12: Lt -> LtE"
    source: str  # the whole module after the edit, normalized


def normalize(source: str) -> str:
    """One spelling per program: parse and unparse (comments and layout go, docstrings stay)."""
    return ast.unparse(ast.parse(source)) + "\n"


def _entry(tree: ast.Module, entry: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return node
    return None


def _body_nodes(fn: ast.FunctionDef) -> list[ast.AST]:
    """The function's nodes in a fixed order, docstring excluded."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    out: list[ast.AST] = []
    for stmt in body:
        out.extend(ast.walk(stmt))
    return out


def _plus(node: ast.expr, delta: int) -> ast.expr:
    op = ast.Add() if delta > 0 else ast.Sub()
    return ast.BinOp(left=node, op=op, right=ast.Constant(abs(delta)))


def _variants(node: ast.AST) -> Iterator[tuple[str, str, object]]:
    """(kind, description, mutate) for one node; `mutate(copy_of_node)` applies the change."""
    if isinstance(node, ast.BinOp | ast.AugAssign):
        for new in BIN_SWAPS.get(type(node.op), ()):
            yield "operator", f"{type(node.op).__name__} -> {new.__name__}", \
                lambda n, new=new: setattr(n, "op", new())
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in CMP_SWAPS.get(type(op), ()):
                def swap(n, i=i, new=new):
                    n.ops[i] = new()
                yield "compare", f"{type(op).__name__} -> {new.__name__}", swap
    if isinstance(node, ast.BoolOp):
        for new in BOOL_SWAPS.get(type(node.op), ()):
            yield "boolean", f"{type(node.op).__name__} -> {new.__name__}", \
                lambda n, new=new: setattr(n, "op", new())
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            yield "constant", f"{node.value} -> {not node.value}", \
                lambda n: setattr(n, "value", not n.value)
        elif isinstance(node.value, int):
            for d in (1, -1):
                yield "constant", f"{node.value} -> {node.value + d}", \
                    lambda n, d=d: setattr(n, "value", n.value + d)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        for i in range(len(node.args)):
            for d in (1, -1):
                def bound(n, i=i, d=d):
                    n.args[i] = _plus(n.args[i], d)
                yield "boundary", f"range arg {i} {d:+d}", bound
    if isinstance(node, ast.Slice):
        for part in ("lower", "upper"):
            if getattr(node, part) is not None:
                for d in (1, -1):
                    yield "boundary", f"slice {part} {d:+d}", \
                        lambda n, part=part, d=d: setattr(n, part, _plus(getattr(n, part), d))


def _blocks(fn: ast.FunctionDef) -> list[list[ast.stmt]]:
    """Every statement list inside the function (the body and nested blocks), in walk order."""
    out = [fn.body]
    for node in ast.walk(fn):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if node is not fn and isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
    return out


def enumerate_edits(source: str, entry: str, *, deletions: bool = True) -> list[Edit]:
    """Every single edit of the family applied to `source`, deduplicated, in a fixed order.
    Edits that leave the program unchanged or do not unparse are dropped."""
    return list(_enumerate(source, entry, deletions))


@lru_cache(maxsize=4096)
def _enumerate(source: str, entry: str, deletions: bool) -> tuple[Edit, ...]:
    """Cached: the same state is revised under every evidence condition."""
    tree = ast.parse(source)
    fn = _entry(tree, entry)
    if fn is None:
        return []
    base = normalize(source)
    nodes = _body_nodes(fn)
    out: list[Edit] = []
    seen = {base}

    def keep(kind: str, where: str, new_tree: ast.Module) -> None:
        try:
            text = normalize(ast.unparse(new_tree))
        except (SyntaxError, ValueError, RecursionError):
            return
        if text not in seen:
            seen.add(text)
            out.append(Edit(kind, where, text))

    for idx, node in enumerate(nodes):
        for kind, desc, mutate in _variants(node):
            clone = copy.deepcopy(tree)
            target = _body_nodes(_entry(clone, entry))[idx]
            mutate(target)  # type: ignore[operator]  # _variants yields callables as object
            keep(kind, f"node {idx}: {desc}", clone)
    if deletions:
        for b, block in enumerate(_blocks(fn)):
            if len(block) < 2:
                continue
            for s in range(len(block)):
                if b == 0 and s == 0 and isinstance(block[0], ast.Expr) \
                        and isinstance(block[0].value, ast.Constant):
                    continue  # the docstring
                clone = copy.deepcopy(tree)
                del _blocks(_entry(clone, entry))[b][s]
                keep("delete", f"block {b} statement {s}", clone)
    return tuple(out)


def restorations(source: str, history: list[str]) -> list[Edit]:
    """Put back one hunk in which an earlier state of this trajectory differs from `source`
    (most recent state first): the way a deleted statement or an earlier constant comes back."""
    now = source.splitlines(keepends=True)
    out: list[Edit] = []
    seen = {source}
    for h, old in enumerate(reversed(history)):
        before = old.splitlines(keepends=True)
        matcher = difflib.SequenceMatcher(a=now, b=before, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            text = "".join(now[:i1] + before[j1:j2] + now[i2:])
            try:
                text = normalize(text)
            except SyntaxError:
                continue
            if text not in seen:
                seen.add(text)
                out.append(Edit("restore", f"state -{h + 1} lines {i1}-{i2}", text))
    return out
