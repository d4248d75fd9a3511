"""The proof tables: every obligation, the counts per guarantee, every counterexample.
"""

from __future__ import annotations

from paper.tables.table import Lit, Table, keys
from paper.tree import Results


def proofs(r: Results) -> Table:
    t = Table("proofs", ["obligation", "expected", "result", "s", "what it states"],
              needs="proofs/proofs", long=True,
              widths=[r">{\raggedright\arraybackslash}p{0.27\linewidth}", "l", "l", "r", r">{\raggedright\arraybackslash}p{0.47\linewidth}"])
    for oid in keys(r, "proofs/proofs"):
        k = f"proofs/proofs/{oid}"
        t.rows.append([Lit(oid), f"{{{k}/expect}}", f"{{{k}/result}}", f"{{{k}/seconds|f2}}",
                       Lit(str(r.get(f"{k}/statement")) if r.has(f"{k}/statement") else "")])
    return t


def counterexamples(r: Results) -> Table:
    t = Table("counterexamples", ["broken variant", "kind", "steps", "what Z3 found"],
              needs="proofs/proofs", long=True, widths=[r">{\raggedright\arraybackslash}p{0.3\linewidth}", "l", "r",
                                             r">{\raggedright\arraybackslash}p{0.5\linewidth}"])
    for oid in keys(r, "proofs/proofs"):
        k = f"proofs/proofs/{oid}"
        if not r.has(f"{k}/counterexample/kind"):
            continue
        steps = r.get(f"{k}/counterexample/steps")
        events = [s.get("event") for s in steps if isinstance(s, dict) and s.get("event")]
        note = r.get(f"{k}/counterexample/note") if r.has(f"{k}/counterexample/note") else ""
        t.rows.append([Lit(oid), f"{{{k}/counterexample/kind}}", Lit(str(len(steps))),
                       Lit(f"{', '.join(events)}" + (f" -- {note}" if note else ""))])
    return t


def proof_counts(r: Results) -> Table:
    t = Table("proof_counts", ["guarantee", "obligations", "broken variants", "as expected",
                               "solver seconds"], needs="proofs/counts/obligations")
    for g in keys(r, "proofs/counts/guarantees"):
        k = f"proofs/counts/guarantees/{g}"
        t.rows.append([Lit(g), f"{{{k}/obligations}}", f"{{{k}/broken_variants}}",
                       f"{{{k}/as_expected}}", f"{{{k}/seconds|f1}}"])
    t.rows.append([Lit("all"), "{proofs/counts/obligations}", "{proofs/counts/broken_variants}",
                   "{proofs/counts/as_expected}", "{proofs/counts/seconds|f1}"])
    return t
