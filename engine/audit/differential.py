"""The differential oracle: for a loop with no `[oracle]`, a mutant of a Python artifact file counts
as destroying when it behaves differently from the reference on some input.

Why: without an oracle a tier-2 mutant (cosmic-ray's semantic changes) can only be
"undetermined", so a gate that checks one easy case passes tier 2 unchallenged. The reference is
a tree the gate accepted; a mutant that computes something else on an input the reference
handles is wrong for that input, whether or not the gate noticed. Equivalence is undecidable, so
"no difference in N inputs" is reported as `equivalent` (as far as the search saw), apart from
`undetermined` (no input could be drawn), and neither counts as destroying.

Each mutant is compared in a process of its own (engine/audit/difference.py: the standard library
and Hypothesis), in the audit's sandbox with a time limit, because it runs the worker's code. A
loop's mutants go to one child per share of `jobs` (one worker's code in each), which forks a
process per comparison once Hypothesis is imported: one Python start per batch, not per mutant. The
inputs come from the gate's own code (the literal arguments of its calls and values shaped like
them), the functions' type hints, or, with neither, the reference's own domain.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loopproof.engine.audit.catalogue import Loop
from loopproof.engine.audit.judge import ACCEPT, ERROR, NEVER, REJECT, Deadline, GateReply
from loopproof.engine.audit.mutants import Files, Mutant, apply
from loopproof.engine.audit.operators import kind_of
from loopproof.engine.system.process import ProcessError, gate_environment, run_command
from loopproof.engine.system.sandbox import DEFAULT, Confinement, Sandbox, View, backend
from loopproof.engine.system.trees import remove_tree

CHILD = Path(__file__).resolve().with_name("difference.py")  # real path: the sandbox binds it
MAX_EXAMPLES = 200
CALL_TIMEOUT_S = 1.0
IMPORT_TIMEOUT_S = 5.0  # a module that loops at import is a mutant that differs
TIMEOUT_S = 120.0  # the whole comparison of one mutant (Hypothesis' search and its shrinking)


def applies(loop: Loop, mutant: Mutant) -> bool:
    """A mutant the differential oracle can judge: the loop has no oracle of its own, and the
    mutant rewrites (never deletes) Python files only."""
    return (loop.oracle is None and not mutant.by_construction and bool(mutant.changes)
            and all(content is not None and kind_of(name) == "python"
                    for name, content in mutant.changes))


def gate_sources(loop: Loop) -> list[str]:
    """The gate's own Python: its named files (else every .py file of its folder) and inline
    `-c` code."""
    files = list(loop.gate_files) or sorted(loop.gate_dir.glob("*.py"))
    out = [*loop.gate_code]
    for f in files:
        try:
            out.append(Path(f).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def _write(root: Path, files: Files) -> None:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def compare(loop: Loop, reference: Files, mutant: Mutant, sources: list[str],
            sandbox: Sandbox, scratch_root: Path, deadline: Deadline = NEVER) -> GateReply:
    """REJECT (destroying: it differs), ACCEPT (equivalent as far as the search saw) or ERROR
    (undetermined), with the distinguishing input or the reason in `detail`; NOT_RUN when the
    audit's deadline came first."""
    return compare_many(loop, reference, [mutant], sources, sandbox, scratch_root, deadline)[0]


def compare_many(loop: Loop, reference: Files, mutants: list[Mutant], sources: list[str],
                 sandbox: Sandbox, scratch_root: Path, deadline: Deadline = NEVER
                 ) -> list[GateReply]:
    """`compare` for each of one loop's mutants, in one child (engine/audit/difference.py: one
    Python start and one import of Hypothesis for them all, each comparison in a process forked
    for it), the reference written once."""
    if deadline.passed():
        return [deadline.not_run() for _ in mutants]
    scratch = Path(tempfile.mkdtemp(prefix="diff-", dir=scratch_root))
    try:
        _write(scratch / "reference", reference)
        jobs: list[dict] = []
        owner: list[int] = []  # the mutant of each job (one job per file it rewrites)
        for i, mutant in enumerate(mutants):
            _write(scratch / f"m{i}", apply(reference, mutant.changes))
            for name, _ in mutant.changes:
                jobs.append({"reference": str(scratch / "reference" / name),
                             "mutant": str(scratch / f"m{i}" / name),
                             "module": Path(name).stem, "gate_sources": sources,
                             "max_examples": MAX_EXAMPLES, "call_timeout_s": CALL_TIMEOUT_S,
                             "import_timeout_s": IMPORT_TIMEOUT_S})
                owner.append(i)
        replies = [deadline.settle(r) for r in _run_child(jobs, scratch, sandbox, deadline)]
        out = []
        for i in range(len(mutants)):
            verdicts = [r for r, o in zip(replies, owner, strict=True) if o == i]
            out.append(next((v for v in verdicts if v.outcome == REJECT), None)
                       or next((v for v in verdicts if v.outcome not in (ACCEPT, REJECT)),
                               verdicts[0]))
        return out
    finally:
        remove_tree(scratch, best_effort=True)


def _run_child(jobs: list[dict], scratch: Path, sandbox: Sandbox, deadline: Deadline = NEVER
               ) -> list[GateReply]:
    """Each job's reply: the child's line for it, or why there is none (it ran past TIMEOUT_S,
    the child could not start or ended first, the audit's deadline cut it)."""
    exe = Path(sys.executable)
    view = View(readable=(scratch, CHILD.parent, exe.parent.parent,
                          Path(os.path.realpath(exe)).parent.parent), private_home=True)
    try:
        res = run_command([sys.executable, "-I", str(CHILD)], scratch,
                          deadline.cut(TIMEOUT_S * (len(jobs) + 1)),  # +1: its start
                          env=gate_environment(),
                          stdin=json.dumps({"batch": jobs, "timeout_s": TIMEOUT_S}).encode(),
                          confine=Confinement(sandbox, view))
    except ProcessError as exc:
        return [GateReply(ERROR, f"undetermined: the comparison could not start: {exc}", 0.0)
                for _ in jobs]
    lines: dict[int, dict] = {}
    for line in res.stdout.decode("utf-8", "replace").splitlines():
        try:
            said = json.loads(line)
            lines.setdefault(int(said["index"]), said)
        except (ValueError, KeyError, TypeError):
            continue
    seconds = res.seconds / max(1, len(jobs))
    out = []
    for i in range(len(jobs)):
        said = lines.get(i)
        if said is None and res.killed:
            out.append(GateReply(ERROR, f"undetermined: the comparison ran past "
                                 f"{deadline.cut(TIMEOUT_S):g} s", seconds))
        elif said is None or not isinstance(said.get("reply", {}), dict):
            words = res.stderr.decode("utf-8", "replace").strip()[-300:]
            out.append(GateReply(ERROR, f"undetermined: no reply from the comparison ({words})",
                                 seconds))
        elif "late" in said:
            out.append(GateReply(ERROR, f"undetermined: the comparison ran past {TIMEOUT_S:g} s",
                                 seconds))
        else:
            out.append(_verdict(said["reply"], seconds))
    return out


def _verdict(reply: dict, seconds: float) -> GateReply:
    if reply.get("verdict") == "differs":
        where = (f"{reply.get('function')}{reply.get('input')}" if reply.get("input")
                 else "on import")
        return GateReply(REJECT, f"differs: {where}: reference {reply.get('reference')}, mutant "
                       f"{reply.get('mutant')}", seconds)
    if reply.get("verdict") == "same":
        return GateReply(ACCEPT, "equivalent: no difference in " + "; ".join(
            reply.get("examples", [])), seconds)
    return GateReply(ERROR, f"undetermined: {reply.get('why', 'no verdict')}", seconds)


def judge(loops: Iterable[tuple[Loop, Files, list[Mutant]]], jobs: int,
          sandbox: str | Sandbox = DEFAULT, on_done: Callable[[], None] | None = None,
          deadline: Deadline = NEVER) -> dict[str, dict[str, GateReply]]:
    """Compare every mutant that `applies`, `jobs` at a time: loop id -> mutant key -> verdict
    (the same GateReply shape as an oracle's, so engine/audit/report.py reads both alike)."""
    box = backend(sandbox) if isinstance(sandbox, str) else sandbox
    out: dict[str, dict[str, GateReply]] = {}
    work = []
    for loop, reference, mutants in loops:
        out.setdefault(loop.id, {})
        sources = gate_sources(loop)
        work += [(loop, reference, m, sources) for m in mutants if applies(loop, m)]
    if not work:
        return out
    batches = _batches(work, jobs)
    with tempfile.TemporaryDirectory(prefix="loopproof-diff-") as root, \
            ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [(batch, pool.submit(compare_many, batch[0][0], batch[0][1],
                                       [m for _, _, m, _ in batch], batch[0][3], box, Path(root),
                                       deadline)) for batch in batches]
        for batch, future in futures:
            for (loop, _, m, _), reply in zip(batch, future.result(), strict=True):
                out[loop.id][m.key] = reply
                if on_done is not None:
                    on_done()
    return out


def _batches(work: list[tuple[Loop, Files, Mutant, list[str]]], jobs: int
             ) -> list[list[tuple[Loop, Files, Mutant, list[str]]]]:
    """The comparisons, a mutant in two tiers once, in batches of one loop's mutants each (one
    worker's code per child): a loop gets its share of `jobs` children, at least one, its
    mutants dealt round-robin among them."""
    per_loop: dict[str, list] = {}
    seen: set[tuple[str, str]] = set()
    for item in work:
        loop, _, m, _ = item
        if (loop.id, m.key) not in seen:
            seen.add((loop.id, m.key))
            per_loop.setdefault(loop.id, []).append(item)
    total = sum(len(items) for items in per_loop.values())
    batches = []
    for items in per_loop.values():
        count = min(len(items), max(1, -(-len(items) * max(1, jobs) // total)))
        batches += [items[k::count] for k in range(count)]
    return batches
