"""How a run's timeline reads in words: the phrases `loopproof show` prints and its page shows.

Why apart from engine/record/timeline.py: the fold decides what happened, this says it; the text
and the page (engine/commands/show.py, engine/commands/_page.py) share every phrase, so a kill
reason or an outcome reads the same in a terminal and in a browser.
"""

from __future__ import annotations

from typing import Any

from loopproof.engine.record.timeline import Attempt, Timeline, num

EXCERPT_LINES = 3  # lines of the head and of the tail of an output shown in text
LINE_WIDTH = 150  # characters of one output line shown (its start and its end)


def stream_text(d: Any) -> str:
    """A recorded output stream ({bytes, sha256, head, tail}, or an older {tail}) as text, with
    what was left out between head and tail said in words."""
    if not isinstance(d, dict):
        return ""
    head, tail = str(d.get("head", "")), str(d.get("tail", ""))
    omitted = d.get("omitted", 0)
    if omitted:
        return f"{head}\n[... {omitted:,} bytes not kept ...]\n{tail}"
    return head + tail


def excerpt(words: str, n: int = EXCERPT_LINES, width: int = LINE_WIDTH) -> list[str]:
    """The first and last `n` non-empty lines of `words` (all of them when few), each at most
    `width` characters (a longer one keeps its start and its end)."""
    lines = [clip(ln.rstrip(), width) for ln in words.splitlines() if ln.strip()]
    if len(lines) <= 2 * n + 1:
        return lines
    return [*lines[:n], f"[... {len(lines) - 2 * n} lines ...]", *lines[-n:]]


def clip(line: str, width: int = LINE_WIDTH) -> str:
    if len(line) <= width:
        return line
    half = (width - 5) // 2
    return f"{line[:half]} ... {line[-half:]}"


def gate_words(gate: dict[str, Any]) -> str:
    """What the gate printed: its recorded output streams, else the verdict's detail."""
    out = gate.get("output")
    if isinstance(out, dict) and out:
        return "\n".join(s for s in (stream_text(out.get("stdout")),
                                     stream_text(out.get("stderr"))) if s.strip())
    detail = str(gate.get("detail") or "")
    return detail.split("; ", 1)[1] if detail.startswith("exit ") and "; " in detail else detail


def gate_line(gate: dict[str, Any] | None, a: Attempt) -> str:
    if gate is None:
        if a.overrun is not None and a.overrun.get("what") == "evaluation":
            return f"not run: {a.overrun['why']}"
        return "not run" if a.outcome != "open" else "not run yet"
    how = gate.get("error") or (f"exit {gate['exit']}" if isinstance(gate.get("exit"), int)
                                else clip(str(gate.get("detail") or "").split(";", 1)[0], 80))
    secs = gate.get("seconds")
    return (f"{gate.get('verdict')}" + (f" ({how})" if how else "")
            + (f" in {num(secs)} s" if isinstance(secs, int | float) and secs else ""))


def gate_notes(gate: dict[str, Any] | None) -> list[str]:
    """What a reader should know about how the gate ended, beyond its verdict."""
    if not gate:
        return []
    out = []
    raised = gate.get("raised")
    if raised and gate.get("verdict") == "reject" and not str(raised).startswith(
            "AssertionError"):
        out.append(f"the gate raised {raised}: a Python gate that raises exits 1, which reads "
                   f"as reject; exit 2 on the gate's own failures makes it an error")
    if gate.get("changed"):
        out.append("the gate changed its snapshot: " + ", ".join(gate["changed"][:5])
                   + (" ..." if len(gate["changed"]) > 5 else ""))
    return out


def outcome_words(t: Timeline) -> str:
    d = t.as_json()
    s, b = d["summary"], d["bounds"]
    tally = (f"{s['attempts_total']} attempt(s) of W = {b['W']}, {s['repairs_used']} repair(s) "
             f"of K = {d['graph']['repair_budget']}, spend {num(s['spend']['settled'])} of "
             f"B = {num(s['spend']['budget'])}")
    if t.unfinished():
        return f"{t.unfinished()}\n  so far: {tally}"
    why = ""
    if d["outcome"] == "FAILED":
        fail = next((e for e in reversed(t.events) if e["type"] == "fail"), None)
        if fail is not None:
            node = fail["node"]
            tried = [a for a in t.attempts if a.node == node]
            last = tried[-1].activation if tried else 0
            verdicts = [a.outcome for a in tried if a.activation == last]
            why = (f"\n  why: {node} failed every attempt of activation {last} "
                   f"({', '.join(verdicts)}) and {fail['text'].split(' and ', 1)[-1]}")
    elif d["outcome"] == "BUDGET_EXHAUSTED":
        refuse = next((e for e in reversed(t.events) if e["type"] == "refuse"), None)
        if refuse is not None:
            why = f"\n  why: {refuse['text']}"
    return f"{d['outcome']} after {tally}{why}"
