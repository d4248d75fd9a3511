"""The `calls` harness: runs inside the candidate's sandbox, standard library only.

The engine starts it as `python -I -c <this file's text>` in a scratch copy of the judged tree
(nothing of the gate's there: no case file, no expectation) and writes the job on its stdin:
`{"module": M, "function": F, "calls": [[args, kwargs], ...]}`. It reads the whole job before
any judged code runs, keeps a private copy of stdout as the results channel, points fd 1 at
stderr (so the judged code's prints never land among the results), imports M, calls F once per
case, and writes one line per case: `{"case": i, "value": V}` when the result is a plain JSON
value of exactly JSON's types, else `{"case": i, "raised": "..."}`.

It decides nothing: no exit status it has is read, and the engine parses every line strictly
(engine/run/judge/wire.py) and compares the values itself (model/judging.py). Judged code that
ends the process, rewrites the exit status, prints, or patches this harness can only lose cases.
"""

import importlib
import json
import math
import os
import sys

MAX_LINE = 1 << 20
MAX_DEPTH = 64


class NotPlain(Exception):
    pass


def plain(v, depth=0):
    """`v` itself if it is a plain JSON value of exactly JSON's types; NotPlain otherwise. Only
    `type(...) is` checks and built-in iteration: no method of the judged code's objects runs."""
    if depth > MAX_DEPTH:
        raise NotPlain("nested too deeply")
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        if not math.isfinite(v):
            raise NotPlain(f"{v!r} is not a JSON number")
        return v
    if t is list:
        return [plain(x, depth + 1) for x in v]
    if t is dict:
        for k in v:
            if type(k) is not str:
                raise NotPlain(f"a dict key of type {type(k).__name__}")
        return {k: plain(x, depth + 1) for k, x in v.items()}
    raise NotPlain(f"a {t.__name__} is not a JSON value")


def encode(case, value=None, raised=None, dumps=json.dumps):
    """One result line: the case's plain value, or what went wrong (`raised`)."""
    if raised is None:
        try:
            row = {"case": case, "value": plain(value)}
        except NotPlain as exc:
            row = {"case": case, "raised": str(exc)[:200]}
        except RecursionError:
            row = {"case": case, "raised": "nested too deeply"}
    else:
        row = {"case": case, "raised": raised[:200]}
    try:
        line = dumps(row, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError) as exc:
        line = dumps({"case": case, "raised": f"not a JSON value: {exc}"[:200]})
    if len(line) > MAX_LINE:
        line = dumps({"case": case, "raised": "result larger than the limit"})
    return line.encode("utf-8") + b"\n"


def main():
    job = json.loads(sys.stdin.buffer.read())
    results = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the process's stdin, open until it ends)
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.getcwd())
    dumps = json.dumps

    calls = job["calls"]
    try:
        fn = getattr(importlib.import_module(job["module"]), job["function"])
    except BaseException as exc:  # SystemExit at import included: every case lost, nothing won
        for i in range(len(calls)):
            results.write(encode(i, raised=f"import: {type(exc).__name__}: {exc}", dumps=dumps))
        return
    for i, (args, kwargs) in enumerate(calls):
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:
            results.write(encode(i, raised=f"{type(exc).__name__}: {exc}", dumps=dumps))
            continue
        results.write(encode(i, value, dumps=dumps))


if __name__ == "__main__":
    main()
