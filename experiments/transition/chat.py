"""The chat protocol of the model coders: what a model is shown, and how its text becomes a typed
action (engine.admission.actions Keep | Patch | Escalate) before anything moves.

The prompt shows the task, the whole current solution.py and the evidence; a failing check is
shown concretely, as the failing call, what it should return and what it returned. The reply
may be short: the prompt asks for the corrected function(s) alone, and a unified diff of
solution.py is accepted too (`experiments.transition.reply_edits` turns either into the whole
new file, or refuses it with a reason). The code travels in a fenced block, not inside a JSON string: measured on the two
local models, a JSON string made them either copy the schema's one-function example or copy the
file's docstrings unescaped. The reply forms, matched on the whole stripped reply and nothing
else:

    STATUS: DONE | STATUS: UNSURE (optional line), one ```python block -> Patch (functions)
    STATUS: DONE | STATUS: UNSURE (optional line), one ```diff block   -> Patch (diff)
    either of these followed by an explanation (no fence, no status)   -> the same Patch
    KEEP                                                               -> Keep
    ESCALATE: <reason>                                                 -> Escalate(reason)

Each is rewritten into the engine's reply schema and parsed by `parse_reply`, so the typed
boundary is the engine's; any other text goes to `parse_reply` unchanged (a JSON action is
accepted, "STATUS: DONE" alone is the DONE-only case, prose is not an action: both Keep). The
self-report is the status line; it is recorded and authorises nothing. An explanation after the
block is ignored (both local models add one although the prompt asks for nothing after the
block: 7 of 11 first replies did); prose before the block, a second block or a status line
after it are not a form. The prompt is the same
for every model and every evidence condition.
"""

from __future__ import annotations

import json
import re
from typing import Any

from experiments.transition.reply_edits import Refused, apply_diff, check_bytes, replace_functions
from loopproof.engine.admission.evidence import Evidence

SOLUTION = "solution.py"

SYSTEM = ("You are an expert Python programmer. You revise one module, solution.py, to make it "
          "implement its task correctly. Your reply gives the functions you change; the rest of "
          "the file is kept.")

INSTRUCTION = (
    "Read the code line by line against the task and the evidence, and correct any mistake you "
    "find. Reply with the line STATUS: DONE if you believe your corrected code is correct (else "
    "STATUS: UNSURE), then the corrected function in one ```python block (only the functions you "
    "change, with any import they need; the rest of the file is kept), and nothing after it. To "
    "leave the file unchanged, reply KEEP instead; to give up, reply ESCALATE: and the reason.")

NO_EVIDENCE = "No evidence is available."

_FENCED = re.compile(r"(?:STATUS:[ \t]*(?P<status>DONE|UNSURE)[ \t]*\n\s*)?"
                     r"```(?P<lang>python|py|diff|patch)[ \t]*\n(?P<code>.*?)\n?[ \t]*```"
                     r"(?P<after>(?:[ \t]*\n(?:(?!```).)*)?)", re.S)
_ESCALATE = re.compile(r"ESCALATE:[ \t]*(?P<reason>.+)", re.S)
_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(?P<body>.*)\n?```", re.S)


def evidence_text(evidence: Evidence | None, entry: str | None = None) -> str:
    """What the model is shown of the evidence: a failing check as the failing call, what it
    should return and what it returned; any other evidence as its text."""
    if evidence is None:
        return NO_EVIDENCE
    payload: dict[str, Any] = evidence.payload
    text = str(payload.get("text", ""))
    failed = payload.get("failed")
    if entry and isinstance(failed, list) and failed and isinstance(failed[0], dict):
        f = failed[0]
        args = str(f.get("args", ""))
        inner = args[1:-1].rstrip(",") if args.startswith("(") else args
        return (f"{payload.get('check', 'check')}: FAIL\n"
                f"The failing call: {entry}({inner})\n"
                f"It should return: {f.get('expected')}\n"
                f"It returned:      {f.get('actual')}")
    return text


def messages(prompt: str, source: str, evidence: Evidence | None, entry: str | None = None
             ) -> list[dict[str, str]]:
    """The chat messages for one revision: the task, the whole current file, the evidence."""
    user = (f"Task:\n```python\n{prompt}```\n\n"
            f"Current solution.py (the whole file):\n```python\n{source}```\n\n"
            f"Evidence about solution.py:\n{evidence_text(evidence, entry)}\n\n{INSTRUCTION}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


_CURRENT = re.compile(r"Current solution\.py \(the whole file\):\n```python\n(?P<code>.*?)```", re.S)


def shown_file(messages: list[dict[str, str]]) -> str | None:
    """The current solution.py a request showed the model (None if it is not in this form)."""
    m = _CURRENT.search(messages[-1].get("content", "")) if messages else None
    return m.group("code") if m is not None else None


def as_reply_json(content: str | None, current: str | None = None,
                  entry: str | None = None) -> str | None:
    """The model's text in the engine's reply schema when it is one of the reply forms;
    otherwise the text itself (a ```json fence taken off) for `parse_reply` to judge. A
    ```python block is the functions form applied to `current` (the whole file when `current`
    is None), a ```diff block a unified diff of `current`. An edit that cannot be applied
    raises reply_edits.Refused with its class and reason."""
    if content is None:
        return None
    check_bytes(content)
    text = content.strip()
    m = _FENCED.fullmatch(text)
    if m is not None and m.group("code").strip() and "```" not in m.group("code") \
            and "STATUS:" not in m.group("after"):
        status, code = m.group("status"), m.group("code") + "\n"
        if m.group("lang") in ("diff", "patch"):
            if current is None:
                raise Refused("not_applicable", "a diff needs the file it applies to")
            new = apply_diff(current, code)
        else:
            new = code if current is None else replace_functions(current, code, entry)
        return json.dumps({"action": "patch", "files": {SOLUTION: new},
                           **({"note": status.lower()} if status else {})})
    if text == "KEEP":
        return json.dumps({"action": "keep"})
    e = _ESCALATE.fullmatch(text)
    if e is not None and e.group("reason").strip():
        return json.dumps({"action": "escalate", "reason": e.group("reason").strip()})
    j = _JSON_FENCE.fullmatch(text)
    return j.group("body") if j is not None else text
