"""The short edit forms a model may reply with (experiments/transition/reply_edits.py), through
the coder's fail-closed parser: stored replies, no model. Valid forms become the whole new
solution.py; malformed and hostile ones (a diff of another file, odd bytes) are Keep with a
class and a reason, and nothing is written."""

from __future__ import annotations

import pytest

from experiments.transition.coders import SOLUTION, OpenAICoder
from experiments.transition.edits import normalize
from loopproof.engine.admission.actions import Keep, Patch

FILE = ("from typing import List\n\n\ndef _twice(x):\n    return 2 * x\n\n\n"
        "def inc(xs: List[int]) -> List[int]:\n    '''Each x plus one.'''\n"
        "    out = []\n    for x in xs:\n        out.append(x + 2)\n    return out\n")
FIXED = FILE.replace("x + 2", "x + 1")
DIFF = ("--- a/solution.py\n+++ b/solution.py\n@@ -11,3 +11,3 @@\n     for x in xs:\n"
        "-        out.append(x + 2)\n+        out.append(x + 1)\n     return out\n")


def parse(reply: str):
    return OpenAICoder.parse(reply, FILE, "inc")


def patched(reply: str) -> str:
    r = parse(reply)
    assert r.valid and isinstance(r.action, Patch), (r.why, r.action)
    assert set(r.action.files) == {SOLUTION}
    return r.action.files[SOLUTION]


# --------------------------------------------------------------------------- valid
def test_a_lone_function_replaces_its_namesake_and_keeps_imports_and_helpers():
    fn = ("def inc(xs: List[int]) -> List[int]:\n    '''Each x plus one.'''\n"
          "    return [x + 1 for x in xs]\n")
    new = patched(f"STATUS: DONE\n```python\n{fn}```")
    assert new == normalize(FILE.split("def inc")[0] + fn)
    assert "from typing import List" in new and "def _twice" in new


def test_a_new_helper_goes_before_the_entry_and_a_missing_import_is_added():
    block = ("import math\n\ndef _one():\n    return math.floor(1.2)\n\n"
             "def inc(xs):\n    return [x + _one() for x in xs]\n")
    new = patched(f"```python\n{block}```")
    assert new.index("import math") < new.index("def _twice") < new.index("def _one") \
        < new.index("def inc")
    assert new.count("from typing import List") == 1


def test_the_whole_file_is_still_a_reply():
    assert patched(f"STATUS: UNSURE\n```python\n{FIXED}```") == normalize(FIXED)


@pytest.mark.parametrize("diff", [
    DIFF,
    DIFF.replace("@@ -11,3 +11,3 @@", "@@ -2,3 +2,3 @@"),        # line numbers are not trusted
    DIFF.replace("--- a/solution.py\n+++ b/solution.py\n", ""),  # no header: solution.py
    DIFF.replace("a/solution.py", "solution.py").replace("b/solution.py", "solution.py"),
])
def test_a_unified_diff_of_solution_py_is_applied(diff):
    assert patched(f"STATUS: DONE\n```diff\n{diff}```") == normalize(FIXED)


# --------------------------------------------------------------------------- malformed
@pytest.mark.parametrize(("reply", "why"), [
    ("```python\nx = 1\n```", "malformed_action"),                          # no function
    ("```python\ndef inc(xs):\n    return xs\nprint(inc([1]))\n```", "malformed_action"),
    ("```python\ndef inc(xs):\n    return 1\ndef inc(xs):\n    return 2\n```", "malformed_action"),
    ("```python\ndef inc(xs:\n```", "syntax_error"),
    ("```diff\n@@ -1 +1 @@\n-    out.append(x + 3)\n+    out.append(x + 1)\n```",
     "not_applicable"),                                                     # old lines absent
    ("```diff\n@@ -1 +1 @@\n-        return x\n+        return y\n```", "not_applicable"),
    ("```diff\n--- a/solution.py\n+++ b/solution.py\n```", "not_applicable"),  # no hunk
    ("```diff\n@@ -1 +1 @@\n*    out = []\n```", "not_applicable"),          # bad hunk line
    ("```diff\n@@ -1 +1 @@\n+def extra():\n```", "not_applicable"),          # nothing to anchor
    ("```diff\n@@ -11,1 +11,1 @@\n-        out.append(x + 2)\n+        out.append(x +\n```",
     "syntax_error"),                                                       # result does not parse
])
def test_a_malformed_edit_is_keep_with_its_class(reply, why):
    r = parse(reply)
    assert isinstance(r.action, Keep) and not r.valid and r.why == why and not r.claims_done
    assert r.action.reason.startswith("invalid reply: ")


def test_a_hunk_whose_old_lines_occur_twice_is_refused():
    twice = FILE + "\n\ndef other(xs):\n    out = []\n    return out\n"
    r = OpenAICoder.parse("```diff\n@@ -1 +1 @@\n     out = []\n+    out.append(0)\n```", twice,
                          "inc")
    assert r.why == "not_applicable" and "2 times" in r.action.reason


# --------------------------------------------------------------------------- hostile
@pytest.mark.parametrize("path", ["a/../../etc/passwd", "b/tests/test_solution.py", "/dev/null",
                                  "a/solution.py.bak", "a/gate/cases.json"])
def test_a_diff_touching_any_other_file_is_refused(path):
    for header in (f"--- {path}\n+++ b/solution.py\n", f"--- a/solution.py\n+++ {path}\n"):
        r = parse(f"```diff\n{header}{DIFF.split(chr(10), 2)[2]}```")
        assert isinstance(r.action, Keep) and r.why == "wrong_file", (header, r.why)
        assert repr(path) in r.action.reason


def test_a_second_file_after_the_hunks_is_refused():
    two = DIFF + "--- a/solution.py\n+++ b/solution.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert parse(f"```diff\n{two}```").why == "wrong_file"


@pytest.mark.parametrize("odd", ["\x00", "\x1b[2J", "\x7f", "\x0c", "\ud800"])
def test_odd_bytes_anywhere_in_a_reply_are_refused(odd):
    for reply in (f"```python\ndef inc(xs):\n    return xs{odd}\n```",
                  f"```diff\n{DIFF.replace('x + 1', 'x + 1' + odd)}```", f"KEEP{odd}"):
        r = parse(reply)
        assert isinstance(r.action, Keep) and not r.valid and r.why == "odd_bytes", repr(reply)


def test_no_edit_form_reaches_outside_solution_py():
    """Whatever a reply holds, the only file a Patch writes is solution.py."""
    for reply in (f"```python\n{FIXED}```", f"```diff\n{DIFF}```",
                  "```python\nimport os\ndef inc(xs):\n    return os.listdir('/')\n```"):
        assert set(parse(reply).action.files) == {SOLUTION}
