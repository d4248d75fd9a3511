"""The transition experiment's candidate runner holds to the calls judge's principle: the
candidate's process never holds an expected value, its objects are compared in the experiment's
process (rebuilt from built-in types), and what it prints or writes on the results channel, or
how it exits, makes no passing row. On main before this change (the runner compared in the
candidate's process and wrote its rows on the candidate's stdout) the always-equal, list-subclass
and caller-frame candidates passed every case, and the ones that end the process, print, or write
on the channel raised JSONDecodeError in the experiment."""

from __future__ import annotations

import json

import pytest

from experiments.transition.runs import Case, Opaque, run_cases, same, untag

CASES = [Case("(2, 3)", "5"), Case("(-1, 4)", "3"), Case("(10, 0)", "10")]  # never 0
CORRECT = "def add(a, b):\n    return a + b\n"
HOSTILE = {
    "always equal": "class E:\n    def __eq__(self, o):\n        return True\n"
                    "def add(a, b):\n    return E()\n",
    "equal list subclass": "class L(list):\n    def __eq__(self, o):\n        return True\n"
                           "def add(a, b):\n    return L([a])\n",
    "reads the caller's frames": "import sys\ndef add(a, b):\n    f = sys._getframe(1)\n"
                                 "    while f is not None:\n"
                                 "        for k in ('want', 'expected', 'b_want'):\n"
                                 "            if k in f.f_locals:\n"
                                 "                return f.f_locals[k]\n"
                                 "        f = f.f_back\n    return None\n",
    "forges rows on every channel": "import os\nfor fd in range(1, 10):\n    try:\n"
                                    "        os.write(fd, b'[[[true, \"5\", 0.0], [true, \"3\", "
                                    "0.0], [true, \"10\", 0.0]]]\\n{\"case\": 0, \"value\": "
                                    "[[\"i\", \"0x5\"], \"5\", 0.0]}\\n')\n    except OSError:\n"
                                    "        pass\ndef add(a, b):\n    return 0\n",
    "prints a forged report": "def add(a, b):\n    print('[[[true, \"5\", 0.0]]]')\n"
                              "    return 0\n",
    "ends its process at load": "import os\nos._exit(0)\n",
    "ends its process in a call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "exits 0 from a call": "def add(a, b):\n    raise SystemExit(0)\n",
}


def test_a_correct_candidate_passes_and_hostile_ones_in_the_same_batch_do_not() -> None:
    names = sorted(HOSTILE)
    rows = run_cases("add", [CORRECT, *(HOSTILE[n] for n in names), CORRECT], CASES)
    assert [ok for ok, _, _ in rows[0]] == [True] * 3 and rows[0] == rows[-1]
    for name, row in zip(names, rows[1:-1], strict=True):
        assert not any(ok for ok, _, _ in row), (name, row)
    died = dict(zip(names, rows[1:-1], strict=True))
    assert died["ends its process at load"] == [(False, "process died", 0.0)] * 3
    assert died["exits 0 from a call"][0][1] == "raised SystemExit"


def test_first_stops_at_the_first_passing_candidate_across_batches() -> None:
    wrong = "def add(a, b):\n    return a - b\n"
    rows = run_cases("add", [wrong] * 9 + [CORRECT, wrong], CASES, first=True)
    assert len(rows) == 10 and all(ok for ok, _, _ in rows[-1])


@pytest.mark.parametrize("value", [None, True, 3, -2 ** 80, 0.1, float("inf"), 1j, "é", b"\x00",
                                   [1, (2, 3)], {"a": [1]}, {1, 2}, frozenset({"x"}), ()])
def test_untag_rebuilds_built_in_values_and_same_keeps_pythons_equality(value) -> None:
    from experiments.transition.candidate_runner import RUNNER
    ns: dict = {}
    exec(RUNNER[RUNNER.index("def tagged"):RUNNER.index("def short")], ns)  # the runner's own
    back = untag(json.loads(json.dumps(ns["tagged"](value))))
    assert back == value and type(back) is type(value)
    assert same(1, 1.0, False) and same(True, 1, False) and not same((1,), [1], False)
    assert not same(Opaque(), Opaque(), False) and untag(["x", "E"]) != untag(["x", "E"])
