"""The differential oracle: for a loop with no `[oracle]`, a mutant of a Python artifact file counts
as destroying when it behaves differently from the reference on some input.

Why: without an oracle a tier-2 mutant (cosmic-ray's semantic changes) can only be
"undetermined", so a gate that checks one easy case passes tier 2 unchallenged. The reference is
a tree the gate accepted; a mutant that computes something else on an input the reference
handles is wrong for that input, whether or not the gate noticed. Equivalence is undecidable, so
"no difference in N inputs" is reported as `equivalent` (as far as the search saw), apart from
`undetermined` (no input could be drawn), and neither counts as destroying.

Each mutant is compared in a child process (engine/audit/difference.py: the standard library and
Hypothesis), in the audit's sandbox with a time limit, because it runs the worker's code. The
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
    if deadline.passed():
        return deadline.not_run()
    scratch = Path(tempfile.mkdtemp(prefix="diff-", dir=scratch_root))
    try:
        _write(scratch / "reference", reference)
        _write(scratch / "mutant", apply(reference, mutant.changes))
        verdicts = []
        for name, _ in mutant.changes:
            job = {"reference": str(scratch / "reference" / name),
                   "mutant": str(scratch / "mutant" / name),
                   "module": Path(name).stem, "gate_sources": sources,
                   "max_examples": MAX_EXAMPLES, "call_timeout_s": CALL_TIMEOUT_S,
                   "import_timeout_s": IMPORT_TIMEOUT_S}
            verdicts.append(deadline.settle(_run_child(job, scratch, sandbox,
                                                       deadline.cut(TIMEOUT_S))))
            if verdicts[-1].outcome == REJECT:
                return verdicts[-1]
        return next((v for v in verdicts if v.outcome not in (ACCEPT, REJECT)), verdicts[0])
    finally:
        remove_tree(scratch, best_effort=True)


def _run_child(job: dict, scratch: Path, sandbox: Sandbox, timeout_s: float = TIMEOUT_S
               ) -> GateReply:
    exe = Path(sys.executable)
    view = View(readable=(scratch, CHILD.parent, exe.parent.parent,
                          Path(os.path.realpath(exe)).parent.parent), private_home=True)
    try:
        res = run_command([sys.executable, "-I", str(CHILD)], scratch, timeout_s,
                          env=gate_environment(), stdin=json.dumps(job).encode(),
                          confine=Confinement(sandbox, view))
    except ProcessError as exc:
        return GateReply(ERROR, f"undetermined: the comparison could not start: {exc}", 0.0)
    if res.killed:
        return GateReply(ERROR, f"undetermined: the comparison ran past {timeout_s:g} s",
                       res.seconds)
    try:
        reply = json.loads(res.stdout.decode("utf-8").strip().splitlines()[-1])
    except (ValueError, IndexError, UnicodeDecodeError):
        words = res.stderr.decode("utf-8", "replace").strip()[-300:]
        return GateReply(ERROR, f"undetermined: no reply from the comparison ({words})",
                       res.seconds)
    if reply.get("verdict") == "differs":
        where = (f"{reply.get('function')}{reply.get('input')}" if reply.get("input")
                 else "on import")
        return GateReply(REJECT, f"differs: {where}: reference {reply.get('reference')}, mutant "
                       f"{reply.get('mutant')}", res.seconds)
    if reply.get("verdict") == "same":
        return GateReply(ACCEPT, "equivalent: no difference in " + "; ".join(
            reply.get("examples", [])), res.seconds)
    return GateReply(ERROR, f"undetermined: {reply.get('why', 'no verdict')}", res.seconds)


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
    with tempfile.TemporaryDirectory(prefix="loopproof-diff-") as root, \
            ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        seen: dict[tuple[str, str], object] = {}
        futures = []
        for loop, ref, m, src in work:  # a mutant in two tiers is compared once
            if (loop.id, m.key) not in seen:
                seen[(loop.id, m.key)] = pool.submit(compare, loop, ref, m, src, box, Path(root),
                                                     deadline)
                futures.append((loop.id, m.key, seen[(loop.id, m.key)]))
        for loop_id, key, future in futures:
            out[loop_id][key] = future.result()
            if on_done is not None:
                on_done()
    return out
