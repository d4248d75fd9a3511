"""`python -m loopproof.proofs new NAME --guarantee Gk`: the skeleton of a new guarantee.

Writes proofs/<gk>_<name>.py (an invariant, its proof over the family, a broken variant and the
bounded search that must refute it), registers both obligations in proofs/obligations.py, and
writes tests/proofs/test_<gk>_<name>.py. Every placeholder raises `NotImplementedError`, which
`python -m loopproof.proofs` reports as "unwritten" (never "proved"), so the new obligations and the new
test fail until they are filled in. Nothing is written if any target exists or an argument is
bad (exit 2, one line).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARK = "    # ---- new obligations (`python -m loopproof.proofs new`) are added above this line"

MODULE = '''"""{G}, {title}: TODO one sentence -- what no run may ever do, and why it matters.

Broken variant: TODO the one rule it breaks, and what a run from Init then does.
(Skeleton written by `python -m loopproof.proofs new`; docs/extending.md says what to fill in.)
"""

from __future__ import annotations

import z3

from loopproof.model.graph import LoopGraph, NodeSpec
from loopproof.model.run_rules import RunRules
from loopproof.proofs.checks import Found, bmc, check_inductive, first
from loopproof.proofs.encoding import Params, RunEncoding, State
from loopproof.proofs.family import shapes


def invariant(enc: RunEncoding, s: State) -> z3.BoolRef:
    """TODO: the property, over one encoded state (s.status(v), s.attempts(v), s.settled, ...)."""
    raise NotImplementedError("write invariant() in proofs/{module}.py (docs/extending.md)")


def check() -> Found:
    """Proved: inductive on every DAG of the family, every number and R symbolic. If it comes
    back refuted with a CTI, strengthen the invariant (e.g. with G1's `structural`)."""
    def one(graph: LoopGraph) -> Found:
        enc = RunEncoding(graph, Params.symbolic(graph))
        return check_inductive(enc, lambda s: invariant(enc, s))
    return first(one(g) for g in shapes())


class Broken(RunRules):
    """TODO: override exactly one rule of the table (model/run_rules.py: a guard_<kind>, an
    effect_<kind> or a shared guard such as reservation_fits) the way a bug would."""

    name = "TODO: the bug, in a few words"


GRAPH = LoopGraph.build([NodeSpec("a", attempts=2, spend_ceiling=1.0),
                         NodeSpec("b", needs=("a",), repairs=("a",))],
                        repair_budget=1, spend_budget=10.0)


def run_broken(depth: int = 6) -> Found:
    """Refuted: a run from Init of at most `depth` steps breaks the invariant. Set `depth` to
    the length of the shortest bad run you can write down, plus a step or two."""
    if not any(callable(x) and not k.startswith("__") for k, x in vars(Broken).items()):
        raise NotImplementedError("Broken overrides no rule in proofs/{module}.py: it is the "
                                  "real model, which nothing refutes")
    enc = RunEncoding(GRAPH, Params.of(GRAPH), Broken())
    return bmc(enc, lambda s: z3.Not(invariant(enc, s)), depth, "{title}")
'''

ENTRIES = '''    Obligation("{G}-{slug}", "{G}", "proved",
               f"TODO: the statement ({{FAMILY}})", {module}.check),
    Obligation("{G}-broken-{slug}", "{G}", "refuted",
               "broken: TODO -- a run from Init breaks it", {module}.run_broken),
'''

TEST = '''"""{G}, {title}: proved, and its broken variant refuted by a run the real model does not make
(written by `python -m loopproof.proofs new`; it fails until proofs/{module}.py is filled in)."""

from __future__ import annotations

from loopproof.proofs import {module}
from loopproof.proofs.obligations import OBLIGATIONS, discharge
from loopproof.proofs.replay import real_run

BY_ID = {{ob.id: ob for ob in OBLIGATIONS}}


def test_{name}_is_proved():
    r = discharge(BY_ID["{G}-{slug}"])
    assert r.result == "proved", r.error or (r.counterexample and r.counterexample.render())


def test_{name}_broken_variant_is_refuted_and_the_real_model_does_not_break_it():
    r = discharge(BY_ID["{G}-broken-{slug}"])
    assert r.result == "refuted", r.error or r.hint
    run = real_run(r.counterexample)
    # the real model refuses one of the trace's events, or every state it reaches keeps the
    # invariant: the counterexample is the broken rule's doing, not the model's
    assert run.refused is not None or run.holds({module}.invariant), run.describe()
'''


def _ident(text: str) -> str:
    return text.replace("-", "_")


def register(source: str, module: str, entries: str) -> str:
    """obligations.py with `module` imported and `entries` added above the marker."""
    if MARK not in source:
        raise ValueError("the marker line of proofs/obligations.py is missing")
    m = re.search(r"^from loopproof.proofs import (\([^)]*\)|[^\n]*)$", source, re.M)
    if m is None or " as " in m.group(1):
        raise ValueError("proofs/obligations.py has no plain `from loopproof.proofs import` line")
    names = sorted({x.strip() for x in m.group(1).strip("()").split(",") if x.strip()}
                   | {module})
    line = f"from loopproof.proofs import {', '.join(names)}"
    if len(line) > 100:
        line = "from loopproof.proofs import (\n" + "".join(f"    {n},\n" for n in names) + ")"
    source = source[:m.start()] + line + source[m.end():]
    return source.replace(MARK, entries + MARK, 1)


def new(name: str, guarantee: str, root: Path = ROOT) -> list[Path]:
    """Write the skeleton; the files written (or BadArgument, nothing written)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]{1,40}", name):
        raise BadArgument("NAME", f"{name!r} is not a lower-case identifier",
                          "use letters, digits and _, e.g. node_cap")
    if not re.fullmatch(r"G[1-9][0-9]?", guarantee):
        raise BadArgument("--guarantee", f"{guarantee!r} is not a guarantee id",
                          "give one of docs/design.md's ids, e.g. G3")
    module = f"{guarantee.lower()}_{name}"
    slug = name.replace("_", "-")
    obligations = root / "proofs" / "obligations.py"
    targets = [root / "proofs" / f"{module}.py", root / "tests" / "proofs" / f"test_{module}.py"]
    for t in targets:
        if t.exists():
            raise BadArgument("NAME", f"{t.relative_to(root)} already exists",
                              "choose another name, or remove that file")
    source = obligations.read_text()
    if f'"{guarantee}-{slug}"' in source:
        raise BadArgument("NAME", f"the obligation {guarantee}-{slug} is already registered",
                          "choose another name")
    fill = {"G": guarantee, "module": module, "slug": slug, "name": _ident(name),
            "title": name.replace("_", " ")}
    try:
        updated = register(source, module, ENTRIES.format(**fill))
    except ValueError as exc:
        raise BadArgument("proofs/obligations.py, OBLIGATIONS", str(exc),
                          "restore the file from the repository") from None
    targets[0].write_text(MODULE.format(**fill))
    targets[1].write_text(TEST.format(**fill))
    obligations.write_text(updated)
    return [targets[0], obligations, targets[1]]


class BadArgument(Exception):
    def __init__(self, field: str, problem: str, fix: str) -> None:
        super().__init__(f"python -m loopproof.proofs new: {field}: {problem}; fix: {fix}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m loopproof.proofs new", description=__doc__.split("\n")[0])
    ap.add_argument("name", metavar="NAME", help="the guarantee's name, e.g. node_cap")
    ap.add_argument("--guarantee", required=True, metavar="Gk",
                    help="the guarantee id of docs/design.md it belongs to, e.g. G3")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        written = new(args.name, args.guarantee, args.root)
    except BadArgument as exc:
        print(exc, file=sys.stderr)
        return 2
    for p in written:
        print(f"wrote {p.relative_to(args.root)}")
    module = written[0].stem
    print(f"next: fill in invariant() and Broken in proofs/{module}.py, then "
          f"`python -m loopproof.proofs --only {args.guarantee}-{args.name.replace('_', '-')} "
          f"{args.guarantee}-broken-{args.name.replace('_', '-')}` and "
          f"`pytest tests/proofs/test_{module}.py` (both fail until then)")
    return 0
