"""The program that runs candidates, as `python -I -S -c RUNNER` inside the sandbox
(experiments.transition.tasks.run_cases): it reads one job as JSON on stdin (entry point,
candidates, cases, per-call CPU limit), runs every candidate on every case under a SIGPROF alarm
and a 1 GiB address-space limit, and writes one row per candidate as JSON on stdout.

Why a module of its own: it is a program, not code of this process; it uses only the standard
library, and it is passed to the subprocess as text, never imported there.
"""

RUNNER = r'''
import ast, json, math, resource, signal, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
class Slow(Exception):
    pass
def _alarm(signum, frame):
    raise Slow()
signal.signal(signal.SIGPROF, _alarm)
def same(a, b, approx):
    if approx and isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if approx and isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y, True) for x, y in zip(a, b))
    return a == b
def short(x):
    try:
        r = repr(x)
    except Exception:
        r = "<unrepresentable>"
    return r if len(r) <= 160 else r[:157] + "..."
job = json.loads(sys.stdin.read())
limit = job["call_timeout"]
out = []
for source in job["candidates"]:
    rows = []
    env = {"__name__": "candidate"}
    try:
        signal.setitimer(signal.ITIMER_PROF, limit)
        exec(compile(source, "solution.py", "exec"), env)
        signal.setitimer(signal.ITIMER_PROF, 0)
        fn = env[job["entry"]]
    except BaseException as exc:
        signal.setitimer(signal.ITIMER_PROF, 0)
        out.append([[False, "load error: " + type(exc).__name__, 0.0]] * len(job["cases"]))
        continue
    dead = False
    for args, expected, approx in job["cases"]:
        if dead:
            rows.append([False, "skipped after timeout", 0.0]); continue
        want = ast.literal_eval(expected)
        try:
            call_args = ast.literal_eval(args)
            t0 = time.process_time()
            signal.setitimer(signal.ITIMER_PROF, limit)
            got = fn(*call_args)
            signal.setitimer(signal.ITIMER_PROF, 0)
            used = time.process_time() - t0
            rows.append([bool(same(got, want, approx)), short(got), round(used, 4)])
        except Slow:
            dead = True
            rows.append([False, "timeout", limit])
        except BaseException as exc:
            signal.setitimer(signal.ITIMER_PROF, 0)
            rows.append([False, "raised " + type(exc).__name__, 0.0])
    out.append(rows)
    if job.get("first") and rows and all(r[0] for r in rows):
        break
sys.stdout.write(json.dumps(out))
'''
