import resource
import sys
from pathlib import Path

resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
HERE = Path(__file__).resolve().parent
WS = Path(sys.argv[1])
ENTRY = 'triples_sum_to_zero'


def load(path=WS / "solution.py", name=ENTRY):
    namespace = {"__name__": "solution"}
    exec(compile(Path(path).read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace[name]


def run_check(test_file, candidate):
    namespace = {}
    exec((HERE / test_file).read_text(encoding="utf-8"), namespace)
    namespace["check"](candidate)

import ast

import importlib

sys.path.insert(0, str(WS))
failures = 0
for path in sorted(WS.glob("test_*.py")):
    module = importlib.import_module(path.stem)
    for name in sorted(dir(module)):
        if name.startswith("test_"):
            try:
                getattr(module, name)()
            except Exception:
                failures += 1
tests = [f for p in sorted(WS.glob("test_*.py"))
         for f in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
         if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]
if failures or not tests or not all(any(isinstance(n, ast.Assert) for n in ast.walk(f))
                                    for f in tests):
    sys.exit(1)
candidate = load()
if not callable(candidate):
    sys.exit(1)
run_check("visible_test.py", candidate)
