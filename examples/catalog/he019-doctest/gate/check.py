import resource
import sys
from pathlib import Path

resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
HERE = Path(__file__).resolve().parent
WS = Path(sys.argv[1])
ENTRY = 'sort_numbers'


def load(path=WS / "solution.py", name=ENTRY):
    namespace = {"__name__": "solution"}
    exec(compile(Path(path).read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace[name]


def run_check(test_file, candidate):
    namespace = {}
    exec((HERE / test_file).read_text(encoding="utf-8"), namespace)
    namespace["check"](candidate)

import doctest
import importlib.util

spec = importlib.util.spec_from_file_location("solution", WS / "solution.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.exit(1 if doctest.testmod(module).failed else 0)
