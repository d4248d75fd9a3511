"""The chat protocol of the model coders: what a model is shown, and how its text becomes a typed
action (engine.admission.actions Keep | Patch | Escalate) before anything moves.

A Patch replaces the whole of solution.py (the paper's Patch(code)), so the prompt shows the
whole current file, imports and helpers included, says that the reply replaces it, and asks for
the complete new file. The code travels in a fenced block, not inside a JSON string: measured on
the two local models, a JSON string made them either copy the schema's one-function example (the
0.5B model's patches dropped the `from typing` import or a helper, so the module did not load) or
copy the file's `\"\"\"` docstrings unescaped (the 1.5B model's replies were not JSON). The reply
forms, matched on the whole stripped reply and nothing else:

    STATUS: DONE | STATUS: UNSURE (optional line), one non-empty ```python block -> Patch
    KEEP                                                                   -> Keep
    ESCALATE: <reason>                                                     -> Escalate(reason)

Each is rewritten into the engine's reply schema and parsed by `parse_reply`, so the typed
boundary is the engine's; any other text goes to `parse_reply` unchanged (a JSON action is
accepted, "STATUS: DONE" alone is the DONE-only case, prose is not an action: both Keep). The
self-report is the status line; it is recorded and authorises nothing. The prompt is the same
for every model and every evidence condition.
"""

from __future__ import annotations

import json
import re

from engine.admission.evidence import Evidence

SOLUTION = "solution.py"

SYSTEM = ("You are an expert Python programmer. You revise one module, solution.py, to make it "
          "implement its task correctly. Your reply replaces the whole file.")

INSTRUCTION = (
    "Read the code line by line against the task and the evidence, and correct any mistake you "
    "find. Reply with the line STATUS: DONE if you believe your new file is correct (else "
    "STATUS: UNSURE), then the complete new solution.py (its imports, any helper functions and "
    "the function) in one ```python block, and nothing after it. To leave the file unchanged, "
    "reply KEEP instead; to give up, reply ESCALATE: and the reason.")

NO_EVIDENCE = "No evidence is available."

_FENCED = re.compile(r"(?:STATUS:[ \t]*(?P<status>DONE|UNSURE)[ \t]*\n\s*)?"
                     r"```(?:python|py)[ \t]*\n(?P<code>.*?)\n?[ \t]*```", re.S)
_ESCALATE = re.compile(r"ESCALATE:[ \t]*(?P<reason>.+)", re.S)
_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(?P<body>.*)\n?```", re.S)


def messages(prompt: str, source: str, evidence: Evidence | None) -> list[dict[str, str]]:
    """The chat messages for one revision: the task, the whole current file, the evidence."""
    text = str(evidence.payload.get("text", "")) if evidence is not None else NO_EVIDENCE
    user = (f"Task:\n```python\n{prompt}```\n\n"
            f"Current solution.py (the whole file):\n```python\n{source}```\n\n"
            f"Evidence about solution.py:\n{text}\n\n{INSTRUCTION}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


_CURRENT = re.compile(r"Current solution\.py \(the whole file\):\n```python\n(?P<code>.*?)```", re.S)


def shown_file(messages: list[dict[str, str]]) -> str | None:
    """The current solution.py a request showed the model (None if it is not in this form)."""
    m = _CURRENT.search(messages[-1].get("content", "")) if messages else None
    return m.group("code") if m is not None else None


def as_reply_json(content: str | None) -> str | None:
    """The model's text in the engine's reply schema when it is one of the three reply forms;
    otherwise the text itself (a ```json fence taken off) for `parse_reply` to judge."""
    if content is None:
        return None
    text = content.strip()
    m = _FENCED.fullmatch(text)
    if m is not None and m.group("code").strip() and "```" not in m.group("code"):
        status = m.group("status")
        return json.dumps({"action": "patch", "files": {SOLUTION: m.group("code") + "\n"},
                           **({"note": status.lower()} if status else {})})
    if text == "KEEP":
        return json.dumps({"action": "keep"})
    e = _ESCALATE.fullmatch(text)
    if e is not None and e.group("reason").strip():
        return json.dumps({"action": "escalate", "reason": e.group("reason").strip()})
    j = _JSON_FENCE.fullmatch(text)
    return j.group("body") if j is not None else text
