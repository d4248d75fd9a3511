"""The program that runs candidates, as `python -I -S -c RUNNER` inside the sandbox
(experiments.transition.runs.run_cases), on the principle of the engine's `calls` judge kind
(engine/run/judge/, docs/gates.md): the candidate's code runs where the verdict is not decided.

It reads one job as JSON on stdin (entry point, candidates, the cases' *arguments* only, per-call
CPU limit): no expected value enters its process. It keeps a private copy of stdout as its
results channel and points fd 1 at stderr, so what a candidate prints never lands among the
rows, then runs every candidate on every case under a SIGPROF alarm and a 1 GiB address-space
limit and writes one line per case in the calls wire format (engine/run/judge/wire.py):
`{"case": K, "value": [TAGGED, REPR, SECONDS]}` or `{"case": K, "raised": WHY}`, K numbering
(candidate, case) pairs. TAGGED is the returned value rebuilt from built-in types only, by
exact type checks and the built-in types' own methods (a subclass of a built-in is sent as its
base; anything else as opaque), so no method of the candidate's objects runs to encode it. The
experiment's process decodes it and compares it with the expected value there
(`experiments.transition.runs.same`): the candidate's objects are never compared in the
process that ran them. REPR is the short repr the rows show, as before.

Why a module of its own: it is a program, not code of this process; it uses only the standard
library, and it is passed to the subprocess as text, never imported there.
"""

RUNNER = r'''
import ast, json, os, resource, signal, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
job = json.loads(sys.stdin.read())
results = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
class Slow(Exception):
    pass
def _alarm(signum, frame):
    raise Slow()
signal.signal(signal.SIGPROF, _alarm)
def tagged(v, depth=0):
    if depth > 24:
        return ["x", "nested too deeply"]
    t = type(v)
    if v is None:
        return ["n"]
    if t is bool:
        return ["b", bool(v)]
    if isinstance(v, int):
        return ["i", hex(int.__index__(v))]
    if isinstance(v, float):
        return ["f", float.__repr__(v)]
    if isinstance(v, complex):
        return ["c", complex.__repr__(v)]
    if isinstance(v, str):
        return ["s", str.__str__(v)]
    if isinstance(v, bytes):
        return ["y", bytes.hex(v)]
    if isinstance(v, list):
        return ["l", [tagged(x, depth + 1) for x in list.__iter__(v)]]
    if isinstance(v, tuple):
        return ["t", [tagged(x, depth + 1) for x in tuple.__iter__(v)]]
    if isinstance(v, dict):
        return ["d", [[tagged(k, depth + 1), tagged(x, depth + 1)] for k, x in dict.items(v)]]
    if isinstance(v, frozenset):
        return ["z", [tagged(x, depth + 1) for x in frozenset.__iter__(v)]]
    if isinstance(v, set):
        return ["e", [tagged(x, depth + 1) for x in set.__iter__(v)]]
    return ["x", t.__name__ if isinstance(t.__name__, str) else "?"]
def short(x):
    try:
        r = repr(x)
    except Exception:
        r = "<unrepresentable>"
    return r if len(r) <= 160 else r[:157] + "..."
def send(row):
    line = json.dumps(row, separators=(",", ":"))
    if len(line) > (1 << 20):
        line = json.dumps({"case": row["case"], "value": [["x", "too large"], short(None), 0.0]})
    results.write(line.encode("utf-8") + b"\n")
limit = job["call_timeout"]
n = len(job["args"])
for c, source in enumerate(job["candidates"]):
    env = {"__name__": "candidate"}
    try:
        signal.setitimer(signal.ITIMER_PROF, limit)
        exec(compile(source, "solution.py", "exec"), env)
        signal.setitimer(signal.ITIMER_PROF, 0)
        fn = env[job["entry"]]
    except BaseException as exc:
        signal.setitimer(signal.ITIMER_PROF, 0)
        for k in range(n):
            send({"case": c * n + k, "raised": "load error: " + type(exc).__name__})
        continue
    dead = False
    for k, args in enumerate(job["args"]):
        case = c * n + k
        if dead:
            send({"case": case, "raised": "skipped after timeout"})
            continue
        try:
            call_args = ast.literal_eval(args)
            t0 = time.process_time()
            signal.setitimer(signal.ITIMER_PROF, limit)
            got = fn(*call_args)
            signal.setitimer(signal.ITIMER_PROF, 0)
            used = time.process_time() - t0
            try:
                value = tagged(got)
            except RecursionError:
                value = ["x", "nested too deeply"]
            send({"case": case, "value": [value, short(got), round(used, 4)]})
        except Slow:
            dead = True
            send({"case": case, "raised": "timeout"})
        except BaseException as exc:
            signal.setitimer(signal.ITIMER_PROF, 0)
            send({"case": case, "raised": "raised " + type(exc).__name__})
'''
