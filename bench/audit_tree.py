"""The audit bench's subject: a generated Python project of about 12,000 lines in 17 modules
with a 100-test pytest suite, written deterministically from a seed.

Why generated and not a real project: the target (issue 35) is about size and shape (17
modules, ~12,000 lines, 100 tests), and a generated tree has exactly that shape on every machine,
with nothing to download and no licence to keep; its functions are real code (loops, branches,
arithmetic, string and list handling: what cosmic-ray's operators mutate and a differential
oracle can tell apart), and its tests are computed by running that code, so the suite passes on
the tree and fails on most mutants. Some functions have no test, as in a real project: the
audit's tier 2 should find the false accepts there.

`write(folder, seed)` lays out `tree/kit/*.py` (the package), `tests/test_*.py` (the pinned
suite) and returns the counts; `python -m bench.audit_tree DIR` writes one to look at.
"""

from __future__ import annotations

import random
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

MODULES = 17
TESTS = 100
PACKAGE = "kit"
LINES_PER_MODULE = 700  # a module is filled with functions until it reaches this many lines


def _int_fn(rng: random.Random, name: str) -> str:
    a, b, c = rng.randint(2, 9), rng.randint(-20, 20), rng.randint(3, 40)
    return f'''
def {name}(x: int, y: int) -> int:
    """A piecewise blend of two integers: linear below {c}, folded above it."""
    if x < {c}:
        total = x * {a} + y
    elif x == {c}:
        total = {b} - y
    else:
        total = (x - {c}) * (y % {a} + 1) + {b}
    if total < 0 and y > 0:
        total = -total
    return total
'''


def _list_fn(rng: random.Random, name: str) -> str:
    w, k = rng.randint(2, 4), rng.randint(1, 5)
    return f'''
def {name}(xs: list[int]) -> list[int]:
    """Sums of every window of {w} items, each shifted by {k} when it is odd."""
    out = []
    for i in range(len(xs) - {w} + 1):
        s = 0
        for v in xs[i:i + {w}]:
            s += v
        if s % 2 == 1:
            s = s + {k}
        out.append(s)
    return out
'''


def _text_fn(rng: random.Random, name: str) -> str:
    k = rng.randint(1, 25)
    return f'''
def {name}(text: str) -> str:
    """Letters shifted by {k} places (a Caesar cipher), digits reversed, the rest kept."""
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + {k}) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + {k}) % 26 + 65))
        elif ch.isdigit():
            out.append(str(9 - int(ch)))
        else:
            out.append(ch)
    return "".join(out)
'''


def _count_fn(rng: random.Random, name: str) -> str:
    m = rng.randint(2, 7)
    return f'''
def {name}(xs: list[int]) -> dict[str, int]:
    """How many items fall in each class modulo {m}, and how many are negative."""
    counts = {{"negative": 0}}
    for v in xs:
        key = f"mod{{v % {m}}}"
        counts[key] = counts.get(key, 0) + 1
        if v < 0:
            counts["negative"] += 1
    return counts
'''


def _digits_fn(rng: random.Random, name: str) -> str:
    base = rng.choice((2, 3, 7, 10, 16))
    return f'''
def {name}(n: int) -> int:
    """The sum of the digits of |n| in base {base}, then doubled if n was negative."""
    neg = n < 0
    n = abs(n)
    s = 0
    while n > 0:
        s += n % {base}
        n //= {base}
    return s * 2 if neg else s
'''


def _merge_fn(rng: random.Random, name: str) -> str:
    return f'''
def {name}(a: list[int], b: list[int]) -> list[int]:
    """Two lists merged in sorted order, duplicates kept once."""
    a, b = sorted(a), sorted(b)
    out: list[int] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            v = a[i]
            i += 1
        else:
            v = b[j]
            j += 1
        if not out or out[-1] != v:
            out.append(v)
    for v in a[i:] + b[j:]:
        if not out or out[-1] != v:
            out.append(v)
    return out
'''


def _poly_fn(rng: random.Random, name: str) -> str:
    coeffs = [rng.randint(-5, 5) for _ in range(rng.randint(2, 4))]
    return f'''
def {name}(x: int) -> int:
    """The polynomial with coefficients {coeffs} (constant first) at x, by Horner's rule."""
    result = 0
    for c in reversed({coeffs}):
        result = result * x + c
    return result
'''


def _class_fn(rng: random.Random, name: str) -> str:
    cap = rng.randint(3, 9)
    cls = "".join(p.title() for p in name.split("_"))
    return f'''
class {cls}:
    """A bounded stack of at most {cap} items that drops the oldest."""

    def __init__(self) -> None:
        self.items: list[int] = []

    def push(self, v: int) -> None:
        self.items.append(v)
        if len(self.items) > {cap}:
            self.items.pop(0)

    def total(self) -> int:
        return sum(self.items)


def {name}(xs: list[int]) -> int:
    """Push every item onto a {cls} and return what it holds in the end, summed."""
    s = {cls}()
    for v in xs:
        s.push(v)
    return s.total()
'''


KINDS: tuple[tuple[Callable[[random.Random, str], str], str], ...] = (
    (_int_fn, "int2"), (_list_fn, "ints"), (_text_fn, "text"), (_count_fn, "ints"),
    (_digits_fn, "int"), (_merge_fn, "ints2"), (_poly_fn, "int"), (_class_fn, "ints"))


def _args(rng: random.Random, shape: str) -> tuple:
    def ints() -> list[int]:
        return [rng.randint(-30, 60) for _ in range(rng.randint(3, 8))]
    if shape == "int2":
        return (rng.randint(-10, 60), rng.randint(-10, 30))
    if shape == "int":
        return (rng.randint(-500, 5000),)
    if shape == "text":
        return ("".join(rng.choice("abcXYZ 019,.qrs") for _ in range(rng.randint(4, 14))),)
    if shape == "ints2":
        return (ints(), ints())
    return (ints(),)


def module_text(index: int, rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    """Module `index`'s source and its functions (name, argument shape)."""
    parts = [f'"""Module {index:02d} of the generated bench project: utilities of every kind."""\n'
             "\nfrom __future__ import annotations\n"]
    functions: list[tuple[str, str]] = []
    lines = sum(p.count("\n") for p in parts)
    n = 0
    while lines < LINES_PER_MODULE:
        make, shape = KINDS[n % len(KINDS)]
        name = f"{make.__name__.strip('_').removesuffix('_fn')}_{index:02d}_{n:02d}"
        text = make(rng, name)
        parts.append(text)
        lines += text.count("\n")
        functions.append((name, shape))
        n += 1
    return "\n".join(parts), functions


def _load(name: str, text: str) -> ModuleType:
    module = ModuleType(name)
    exec(compile(text, name, "exec"), module.__dict__)  # noqa: S102 - our own generated code
    return module


def write(folder: Path, seed: int = 0) -> dict[str, int]:
    """Write the project under `folder`: `tree/kit/` (the judged code) and `tests/` (the pinned
    suite, 100 tests spread over five files). Returns its size."""
    rng = random.Random(seed)
    pkg = folder / "tree" / PACKAGE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The generated bench project."""\n')
    catalogue: list[tuple[str, str, str, ModuleType]] = []
    total = 0
    for i in range(1, MODULES + 1):
        text, functions = module_text(i, rng)
        (pkg / f"m{i:02d}.py").write_text(text)
        total += text.count("\n")
        module = _load(f"m{i:02d}", text)
        catalogue += [(f"m{i:02d}", name, shape, module) for name, shape in functions]
    tests_dir = folder / "tests"
    tests_dir.mkdir()
    # about two functions in three could be tested; the 300 assertions are spread evenly over
    # them (every module is imported), the rest left to tier 2 to find
    tested = sorted(rng.sample(range(len(catalogue)), (2 * len(catalogue)) // 3))
    per_file = TESTS // 5
    checks_in_all = TESTS * 3
    for f in range(5):
        body = [f'"""Tests of the generated bench project, part {f + 1} of 5."""\n']
        imports: set[str] = set()
        for t in range(per_file):
            number = f * per_file + t
            checks = []
            for j in range(3):  # three assertions per test, on functions tested in turn
                k = number * 3 + j
                mod, name, shape, module = catalogue[tested[k * len(tested) // checks_in_all]]
                args = _args(rng, shape)
                expected = getattr(module, name)(*args)
                imports.add(mod)
                call = f"{mod}.{name}({', '.join(map(repr, args))})"
                checks.append(f"    assert {call} == {expected!r}")
            body.append(f"\ndef test_{number:03d}():\n" + "\n".join(checks) + "\n")
        head = "".join(f"from {PACKAGE} import {m}\n" for m in sorted(imports))
        (tests_dir / f"test_part{f + 1}.py").write_text(body[0] + "\n" + head + "".join(body[1:]))
    return {"modules": MODULES, "lines": total, "functions": len(catalogue),
            "tested_functions": len({tested[k * len(tested) // (TESTS * 3)]
                                     for k in range(TESTS * 3)}),
            "tests": TESTS}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    print(textwrap.dedent(f"{write(out)}"))
