"""The differential oracle's child program: does a mutant of a Python artifact behave differently
from the reference on some input? Run as `python -I difference.py` with a batch of JSON jobs on
stdin ({"batch": [job, ...], "timeout_s": t}); one JSON line on stdout per job, as it ends:
{"index": i, "reply": reply}, or {"index": i, "late": t} for a job that ran past `t` seconds.

Why a batch, each job in a process forked from this one: starting Python and importing
Hypothesis was most of a comparison's cost (~0.4 CPU-s, paid again for every mutant). The
batch is one loop's mutants (one worker's code: the reference is the same tree in each), and
each comparison still runs in a process of its own, forked before anything of the worker's is
imported: the same state as a fresh child's, whatever the previous comparison's code did to
its own process; its stdout goes nowhere (the replies are this process's), it has a temp folder
of its own, and it is killed with its process group at `timeout_s`.

Why one module: it is the program the sandboxed child runs by its path (`python -I
difference.py`), with nothing of the engine importable there; the batch that forks and the
comparison it forks for are that one program.

Why a child of its own, with only the standard library and Hypothesis: it imports and runs the
worker's code (the reference and the mutant), so it runs in a scratch folder under the engine's
time limit, like a gate; nothing of the engine is in it.

The job: {"reference": path, "mutant": path, "module": name, "gate_sources": [text, ...],
"max_examples": n, "call_timeout_s": t}. For each function the gate names (a call, a name or a
string in its sources; else every public top-level function) that the mutant can have changed
(its definition differs, or it uses, directly or through others, a top-level name whose
definition differs; every function when a statement outside a definition differs: a real
module has hundreds of functions and a mutant changes one), inputs are drawn with Hypothesis
from, in turn: the literal arguments of the gate's own calls, values shaped like them, the
function's type hints, and (when there is none of these) plain values, kept only where the
reference returns normally (its own behaviour says what its domain is). Each input is given, as
a fresh copy, to the reference and to the mutant; they differ when one raises and the other
does not, they raise different exceptions, one runs out of time, or their results differ.
Hypothesis searches for a difference and shrinks it.

Reply: {"verdict": "differs", "function", "input", "reference", "mutant"} when a difference is
found; {"verdict": "same", "examples"} when none was in `max_examples` inputs per function (an
equivalent mutant, as far as the search saw); {"verdict": "undetermined", "why"} when no input
could be drawn (no function, an unsupported signature, a reference that raises on every input).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib.util
import inspect
import json
import math
import os
import select
import signal
import sys
import time
import typing
from pathlib import Path

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException


class _Late(BaseException):
    """A call ran past its time (a BaseException, so the code under test cannot catch it)."""


class _Hung(BaseException):
    """The mutant ran out of time on an input: a difference found, and the search stops there
    (a BaseException, so Hypothesis does not shrink it: each shrink step would wait out the
    call timeout again)."""


def _alarm(signum, frame):  # noqa: ARG001
    raise _Late()


IMPORT_TIMEOUT_S = 5.0


def load(path: str, name: str, timeout_s: float = IMPORT_TIMEOUT_S):
    """Import the file at `path` as module `name` (its folder first on sys.path meanwhile),
    within `timeout_s` (raises _Late)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    folder = str(Path(path).parent)
    sys.path.insert(0, folder)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        spec.loader.exec_module(module)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.path.remove(folder)
    return module


def outcome(fn, args: tuple, timeout_s: float) -> tuple[str, object]:
    """("ok", value) | ("raises", exception name) | ("late", None), on a copy of `args`."""
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return ("ok", fn(*copy.deepcopy(args)))
    except _Late:
        return ("late", None)
    except Exception as exc:  # noqa: BLE001 - the code under test may raise anything
        return ("raises", type(exc).__name__)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def same(a: tuple[str, object], b: tuple[str, object]) -> bool:
    if a[0] != b[0]:
        return False
    x, y = a[1], b[1]
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y))
    try:  # 2 and 2.0 are the same answer; True and 1 are not
        return bool((numbers or type(x) is type(y)) and x == y)
    except Exception:  # noqa: BLE001 - an __eq__ that raises: compare what they print
        return repr(x) == repr(y)


# ---- what the gate says about the inputs ---------------------------------------------------

def _nodes(sources: list[str]):
    """Every AST node of the gate's sources that parse."""
    for text in sources:
        try:
            yield from ast.walk(ast.parse(text))
        except SyntaxError:
            continue


def named(sources: list[str]) -> set[str]:
    """Identifiers, attribute names and short strings in the gate's sources."""
    out: set[str] = set()
    for node in _nodes(sources):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)
        elif isinstance(node, ast.alias):
            out.add(node.name.rsplit(".", 1)[-1])
    return out


def literal_calls(sources: list[str], name: str, arity: int) -> list[tuple]:
    """The argument tuples of the gate's calls to `name` (or to anything, with `arity` literal
    positional arguments: a test harness's `candidate(...)`), where every argument is a literal."""
    mine: list[tuple] = []
    others: list[tuple] = []
    for node in _nodes(sources):
        if not isinstance(node, ast.Call) or node.keywords:
            continue
        callee = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        try:
            args = tuple(ast.literal_eval(a) for a in node.args)
        except (ValueError, SyntaxError, TypeError):
            continue
        if callee == name:
            mine.append(args)
        elif len(args) == arity and arity and callee not in _BUILTIN_CALLS:
            others.append(args)
    return mine or others


_BUILTIN_CALLS = {"print", "len", "int", "float", "str", "list", "tuple", "dict", "set", "exit",
                  "range", "isinstance", "open", "abs", "round", "sorted", "repr", "bool"}


def shaped(value: object, depth: int = 0) -> st.SearchStrategy:
    """Values of the same shape as `value`, near it and far from it."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers()
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(value, str):
        return st.text(max_size=20)
    if isinstance(value, bytes):
        return st.binary(max_size=20)
    if value is None:
        return st.none()
    if depth > 3:
        return st.just(value)
    if isinstance(value, list | tuple | set | frozenset):
        items = [shaped(v, depth + 1) for v in value] or [st.integers()]
        inner = st.one_of(*_distinct(items))
        kind = type(value)
        made = st.lists(inner, max_size=12)
        return made if kind is list else made.map(kind)
    if isinstance(value, dict):
        keys = [shaped(k, depth + 1) for k in value] or [st.text(max_size=5)]
        vals = [shaped(v, depth + 1) for v in value.values()] or [st.integers()]
        return st.dictionaries(st.one_of(*_distinct(keys)), st.one_of(*_distinct(vals)),
                               max_size=6)
    return st.just(value)


def _distinct(strategies: list[st.SearchStrategy]) -> list[st.SearchStrategy]:
    seen: dict[str, st.SearchStrategy] = {}
    for s in strategies:
        seen.setdefault(repr(s), s)
    return list(seen.values())


PLAIN = st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                  st.text(max_size=10), st.lists(st.integers(), max_size=8),
                  st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=8),
                  st.booleans())


def inputs(fn, sources: list[str]) -> tuple[st.SearchStrategy | None, list[str]]:
    """The strategy of argument tuples for `fn`, and where it came from."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()) \
            and not params:
        return None, ["only *args/**kwargs"]
    arity = len(required)
    whence: list[str] = []
    parts: list[st.SearchStrategy] = []
    seen = [a for a in literal_calls(sources, fn.__name__, arity)
            if len(required) <= len(a) <= len(params)]
    if seen:
        whence.append(f"{len(seen)} literal call(s) of the gate")
        parts.append(st.sampled_from(seen))
        for n in sorted({len(a) for a in seen}):
            shapes = [[shaped(a[i]) for a in seen if len(a) == n] for i in range(n)]
            parts.append(st.tuples(*[st.one_of(*_distinct(s)) for s in shapes]))
        whence.append("values shaped like them")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - a hint that does not resolve is no hint
        hints = {}
    if required and all(p.name in hints for p in required):
        try:
            parts.append(st.tuples(*[st.from_type(hints[p.name]) for p in required]))
            whence.append("type hints")
        except (HypothesisException, TypeError, NotImplementedError):
            pass
    if not parts:
        parts.append(st.tuples(*[PLAIN for _ in required]))
        whence.append("plain values (the reference's own domain)")
    return st.one_of(*parts), whence


# ---- what the mutant can have changed -------------------------------------------------------

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def affected(reference: str, mutant: str) -> set[str] | None:
    """The top-level names whose behaviour the mutant can have changed: the definitions that
    differ, and every top-level definition that names one of them, transitively. None when a
    statement outside a definition differs (module state: anything may behave otherwise), or
    either does not parse. A function outside this set runs the same code on the same module
    state in both, so comparing it can find nothing."""
    try:
        ref, mut = ast.parse(reference).body, ast.parse(mutant).body
    except SyntaxError:
        return None

    def split(body: list[ast.stmt]) -> tuple[dict[str, ast.stmt], list[str]]:
        defs = {n.name: n for n in body if isinstance(n, _DEFS)}
        return defs, [ast.dump(n) for n in body if not isinstance(n, _DEFS)]

    (rd, ro), (md, mo) = split(ref), split(mut)
    if ro != mo:
        return None
    changed = {n for n in rd.keys() | md.keys()
               if n not in rd or n not in md or ast.dump(rd[n]) != ast.dump(md[n])}
    uses = {n: {x.id for x in ast.walk(d) if isinstance(x, ast.Name)} for n, d in rd.items()}
    grown = True
    while grown:
        more = {n for n, used in uses.items() if n not in changed and used & changed}
        changed |= more
        grown = bool(more)
    return changed


# ---- the comparison ------------------------------------------------------------------------

def compare(job: dict) -> dict:
    signal.signal(signal.SIGALRM, _alarm)  # before any import: a module may loop forever
    timeout = float(job.get("call_timeout_s", 1.0))
    import_timeout = float(job.get("import_timeout_s", IMPORT_TIMEOUT_S))
    sources = list(job.get("gate_sources", []))
    try:
        ref = load(job["reference"], f"_reference_{job['module']}", import_timeout)
    except BaseException as exc:  # noqa: BLE001
        return {"verdict": "undetermined", "why": f"the reference does not import: "
                f"{type(exc).__name__}: {exc}"}
    try:
        mut = load(job["mutant"], f"_mutant_{job['module']}", import_timeout)
    except _Late:
        return {"verdict": "differs", "function": None, "input": None,
                "reference": "imports", "mutant": "runs out of time on import"}
    except BaseException as exc:  # noqa: BLE001 - the mutant breaks the module
        return {"verdict": "differs", "function": None, "input": None, "reference": "imports",
                "mutant": f"import raises {type(exc).__name__}"}
    functions = {n: f for n, f in vars(ref).items()
                 if inspect.isfunction(f) and f.__module__ == ref.__name__}
    names = named(sources)
    chosen = sorted(n for n in functions if n in names) or sorted(
        n for n in functions if not n.startswith("_"))
    if not chosen:
        return {"verdict": "undetermined", "why": "the reference defines no function to call"}
    reach = affected(Path(job["reference"]).read_text(encoding="utf-8"),
                     Path(job["mutant"]).read_text(encoding="utf-8"))
    if reach is not None:  # only what the mutant can have changed (the others run the same)
        chosen = [n for n in chosen if n in reach] or sorted(n for n in functions if n in reach)
        if not chosen:
            return {"verdict": "undetermined", "why": "the mutant changes no function the "
                    "oracle can call (a method, a class no top-level function uses)"}
    checked: list[str] = []
    for name in chosen:
        other = getattr(mut, name, None)
        if not callable(other):
            return {"verdict": "differs", "function": name, "input": None,
                    "reference": "defines it", "mutant": "does not"}
        strategy, whence = inputs(functions[name], sources)
        if strategy is None:
            continue
        try:
            found, ran = search(functions[name], other, strategy, timeout,
                                int(job.get("max_examples", 200)))
        except HypothesisException as exc:  # e.g. Unsatisfiable: no input in the domain
            return {"verdict": "undetermined", "why": f"{name}: {type(exc).__name__}"}
        if found:
            return {"verdict": "differs", "function": name, "whence": whence, **found}
        if ran:
            checked.append(f"{name}: {ran} inputs ({', '.join(whence)})")
    if not checked:
        return {"verdict": "undetermined",
                "why": "no input drawn on which the reference returns normally"}
    return {"verdict": "same", "examples": checked}


def search(fn, other, strategy: st.SearchStrategy, timeout: float, max_examples: int
           ) -> tuple[dict, int]:
    """Let Hypothesis look for an input, in the reference's domain, on which `fn` and `other`
    differ (and shrink it). Returns (the difference, or {}; how many inputs were compared)."""
    found: dict = {}
    ran = [0]

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate, Phase.shrink])
    @given(args=strategy)
    def differs(args):
        args = args if isinstance(args, tuple) else (args,)
        a = outcome(fn, args, timeout)
        assume(a[0] == "ok")  # inputs in the reference's own domain
        ran[0] += 1
        b = outcome(other, args, timeout)
        if not same(a, b):
            found.update(input="(" + ", ".join(map(repr, args))[:500] + ")", reference=_show(a),
                         mutant=_show(b))
            raise _Hung() if b[0] == "late" else AssertionError("differs")

    try:
        differs()
    except (AssertionError, _Hung):
        return found, ran[0]
    except HypothesisException:
        if ran[0]:
            raise
    return {}, ran[0]


def _show(o: tuple[str, object]) -> str:
    kind, value = o
    if kind == "ok":
        return f"returns {value!r}"[:300]
    if kind == "raises":
        return f"raises {value}"
    return "runs out of time"


def _reply(job: dict) -> bytes:
    try:
        reply = compare(job)
    except BaseException as exc:  # noqa: BLE001 - whatever happened, one reply
        reply = {"verdict": "undetermined", "why": f"{type(exc).__name__}: {exc}"[:300]}
    return json.dumps(reply, sort_keys=True, default=repr).encode()


def _in_child(job: dict, out: int) -> None:
    """The forked comparison: its own process group, stdout to nowhere, a temp folder of its
    own; its reply written to `out`. Never returns."""
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        import tempfile
        with contextlib.suppress(OSError):  # none to make: the comparison may need none
            tempfile.tempdir = os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="job-")
        data = _reply(job)
        while data:
            data = data[os.write(out, data):]
    finally:
        os._exit(0)


def judged(job: dict, timeout_s: float) -> dict | None:
    """One job's reply, from a process forked for it; None when it ran past `timeout_s`."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _in_child(job, write)
    os.close(write)
    chunks: list[bytes] = []
    end = time.monotonic() + timeout_s
    late = False
    while True:
        left = end - time.monotonic()
        if left <= 0 or not select.select([read], [], [], left)[0]:
            late = True
            break
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    if late:
        with contextlib.suppress(OSError):  # its group (gone already: it alone)
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if late:
        return None
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"verdict": "undetermined", "why": "the comparison ended with no reply"}


def main() -> None:
    given_ = json.loads(sys.stdin.read())
    timeout_s = float(given_["timeout_s"])
    for i, job in enumerate(given_["batch"]):
        reply = judged(job, timeout_s)
        line = {"index": i, "late": timeout_s} if reply is None else {"index": i, "reply": reply}
        sys.stdout.write(json.dumps(line, sort_keys=True, default=repr) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
