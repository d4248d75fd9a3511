"""Self-attestation probes: destroy the artifact, then keep or forge what a worker could claim
about it. A gate that accepts the destroyed artifact because of such a claim is self-attesting.

Each helper carries examples (tests/engine/audit/test_audit_operators.py runs them) like the operators do.
"""

from __future__ import annotations

import json
import re

from loopproof.engine.audit.operators.base import Example

_SUCCESS = {"ok": True, "passed": True, "success": True, "status": "passed", "result": "pass",
            "failed": 0, "failures": 0, "errors": 0, "tests": 1}
_SUCCESS_TEXT = "ALL TESTS PASSED\nstatus: ok\nresult: PASS\nOK\n"
# Files a worker could write to claim success, forged when the reference workspace has none.
FORGED: dict[str, str] = {
    "status.json": json.dumps(_SUCCESS, indent=2) + "\n",
    "report.json": json.dumps(_SUCCESS, indent=2) + "\n",
    "STATUS": "PASSED\n",
    "DONE": "done\n",
    "test.log": _SUCCESS_TEXT,
}

_CLAIM_WORD = re.compile(r"(?i)\b(status|verified|passed|pass|ok|done|approved|tested|success)\b")
_COMMENT = re.compile(r"^\s*(#|//|<!--|;)")
_TEXT_NEGATIONS = (("PASSED", "FAILED"), ("Passed", "Failed"), ("passed", "failed"),
                   ("PASS", "FAIL"), ("Pass", "Fail"), ("pass", "fail"), ("SUCCESS", "FAILURE"),
                   ("success", "failure"), ("OK", "FAILED"), ("ok", "failed"),
                   ("verified", "unverified"), ("done", "not done"), ("true", "false"))
_FAILURE_KEY = re.compile(r"(?i)fail|error|broken|skipped")

MARKER_EXAMPLES = (Example("# status: verified\ndef f():\n    return 1\n", "# status: verified\n",
                           "a.py"),)
NEGATE_EXAMPLES = (Example('{"status": "ok", "failed": 0}', '{\n  "status": "failed",\n  "failed": 3\n}\n',
                           "report.json"),
                   Example("ALL TESTS PASSED\n", "ALL TESTS FAILED\n", "run.log"))
FIELD_EXAMPLES = (Example('{"status": "ok", "n": 2}', '{\n  "status": "failed",\n  "n": 2\n}\n',
                          "report.json"),)


def marker_lines(text: str) -> str | None:
    """The comment lines of an artifact that claim something about it ("# status: verified"),
    or None when it has none. Keeping only them is the marker probe."""
    kept = [line for line in text.splitlines(keepends=True)
            if _COMMENT.match(line) and _CLAIM_WORD.search(line)]
    return "".join(kept) or None


def _negate_value(key: str, value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return (value + 3) if _FAILURE_KEY.search(key) else (0 if value else 3)
    if isinstance(value, str):
        return "failed"
    return value


def _negate_text(text: str) -> str:
    for old, new in _TEXT_NEGATIONS:
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def negate(path: str, text: str) -> str:
    """The claim turned into its opposite: every JSON field negated, or success words replaced."""
    try:
        data = json.loads(text)
    except ValueError:
        return _negate_text(text) if _negate_text(text) != text else "FAILED\n"
    if isinstance(data, dict):
        return json.dumps({k: _negate_value(k, v) for k, v in data.items()}, indent=2) + "\n"
    return json.dumps(_negate_value("", data), indent=2) + "\n"


def field_negations(path: str, text: str) -> list[tuple[str, str]]:
    """(field, claim with only that top-level field negated) for a JSON object claim."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    out = []
    for key, value in data.items():
        new = _negate_value(key, value)
        if new != value:
            out.append((key, json.dumps({**data, key: new}, indent=2) + "\n"))
    return out
