"""`loopproof show LEDGER [--json] [--html OUT.html]`: a run as a timeline, to answer "why did my
node fail?" without reading JSON Lines.

Per attempt (in ledger order, by node, activation and attempt): what it reserved and settled
against c_v, the run's settled spend against B after it, how the worker ended (its exit, or the
meter's kill: timeout, spend ceiling, overrun; a pin change), the gate's verdict with the head
and tail of its output; between attempts the repairs, refusals, stops and resumes; the outcome,
or why the run has not ended ("unfinished: attempt open" for a run killed inside an attempt).
`--html` writes one self-contained page (engine/commands/_page.py). Reads only.

Exit 0 when shown (whatever the run's outcome), 5 when the ledger is broken (its verified prefix
is shown first), 2 for a missing file or a ledger that is not a run's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loopproof.engine.record.timeline import Attempt, Timeline, build, num, worker_end
from loopproof.engine.record.timeline_words import (
    excerpt,
    gate_line,
    gate_notes,
    gate_words,
    outcome_words,
    stream_text,
)
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.exits import Exit
from loopproof.model.bounds import GLOSS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ledger", type=Path, metavar="LEDGER", help="the run's ledger")
    parser.add_argument("--json", action="store_true", help="print the timeline as JSON")
    parser.add_argument("--html", type=Path, default=None, metavar="OUT.html",
                        help="also write a self-contained page: spend against the budget over "
                             "the ledger, and the attempts by node")


def main(args: argparse.Namespace) -> int:
    if args.html is not None and args.html.is_dir():
        raise BadInput(str(args.html), "--html", "is a folder", "give a file name, e.g. run.html")
    t = build(args.ledger)
    if args.html is not None:
        from loopproof.engine.commands._page import page
        try:
            args.html.write_text(page(t), encoding="utf-8")
        except OSError as exc:
            raise BadInput(str(args.html), "--html", f"cannot write: {exc.strerror or exc}",
                           "give a path in a folder you can write to") from exc
    if args.json:
        print(json.dumps(t.as_json(), sort_keys=True))
    else:
        print(text(t))
        if args.html is not None:
            print(f"page: {args.html}")
    return Exit.CORRUPT if t.check.status == "broken" else Exit.OK


# ---- text ------------------------------------------------------------------------------------

def _worker_words(a: Attempt) -> list[str]:
    w = a.worker
    out = []
    for name in ("stderr", "stdout"):
        s = stream_text(w.get(name))
        if s.strip():
            size = w[name].get("bytes") if isinstance(w.get(name), dict) else None
            lines = excerpt(s, 1, 50)
            out.append(f"{name}" + (f" ({size:,} bytes)" if isinstance(size, int) else "")
                       + ": " + " | ".join(lines))
    return out


def attempt_lines(a: Attempt, budget: float) -> list[str]:
    head = (f"#{a.begin_seq:<4} {a.node}  activation {a.activation}, attempt {a.attempt}: "
            f"{a.outcome.upper()}" + (f" (began beside {', '.join(a.beside)} in flight)"
                                      if a.beside else ""))
    spend = (f"      spend {num(a.spend)} of c_v = {num(a.spend_ceiling)}: worker "
             f"{num(a.worker_spend)} (reserved {num(a.reserved)}), gate {num(a.gate_spend)} "
             f"(reserved {num(a.gate_reserved)})")
    if a.settled_after is not None:
        spend += f"; run settled {num(a.settled_after)} of B = {num(budget)}"
    lines = [head, spend, f"      worker: {worker_end(a)}"]
    lines += [f"        {w}" for w in _worker_words(a)]
    lines.append(f"      gate: {gate_line(a.gate, a)}")
    if a.gate is not None:
        lines += [f"        | {ln}" for ln in excerpt(gate_words(a.gate))]
        lines += [f"      note: {n}" for n in gate_notes(a.gate)]
    lines += [f"      note: {n}" for n in a.notes]
    return lines


def text(t: Timeline) -> str:
    d = t.as_json()
    g, b = d["graph"], d["bounds"]
    lines = [f"{t.ledger}: {t.check.status}, {t.check.records} records"
             + (f", head {t.check.head[:16]}" if t.check.head else "")
             + (f" — {t.check.error}" if t.check.error else "")]
    lines.append(f"graph: {len(g['nodes'])} node(s), K = {g['repair_budget']} repair(s), "
                 f"B = {num(g['spend_budget'])} spend units")
    if b["W"] is not None:
        w_c = f", W_c = {num(b['W_c'])} spend units" if b["W_c"] is not None else ""
        fits = ("" if b["fits"] is None else
                " (W_c fits B)" if b["fits"] else " (W_c exceeds B)")
        lines.append(f"bound: W = {b['W']} attempts{w_c}{fits}")
        lines.append(f"  {GLOSS}")
    lines.append("")
    items: list[tuple[int, list[str]]] = [(a.begin_seq, attempt_lines(a, g["spend_budget"]))
                                          for a in t.attempts]
    items += [(e["seq"], [f"#{e['seq']:<4} {e['text']}"]) for e in t.events]
    for _, block in sorted(items, key=lambda x: x[0]):
        lines += block
    lines.append("")
    s = d["summary"]
    lines.append("nodes:")
    for n in g["nodes"]:
        ns = s["nodes"][n["name"]]
        lines.append(f"  {n['name']}: {ns['status']} in activation {ns['activation']}, "
                     f"{ns['attempts']} of a_v = {n['attempts']} attempt(s); verdicts "
                     f"{' '.join(ns['verdicts']) or '-'}")
    lines.append("")
    lines.append(f"outcome: {outcome_words(t)}")
    return "\n".join(lines)
