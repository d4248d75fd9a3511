"""The audit's drawing phase alone, on the audit bench's generated tree (bench/audit_tree.py: 17
modules, about 12,000 lines): what `loopproof audit` does between checking the references and
running the first gate, for one loop whose artifact is every module of the package: tier 1 whole
(absence and structural mutants of every module), tier 2 drawn at the CLI's default cap, and
the self-attestation probes.

    python -m bench.audit_draw [--seed S] [--cap N] [--json]

Printed: the CPU seconds of the drawing (this process: it is single-threaded, and runs no
child), the mutant counts, and a SHA-256 over every mutant's label and workspace key, in order:
run side by side with another version of engine/audit (e.g. `PYTHONPATH=OLD_CHECKOUT`), the
digest says whether both drew the same mutants, and the CPU seconds which drew them faster.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

from bench.audit_tree import write
from loopproof.engine.audit.catalogue import Command, Loop, workspace_files
from loopproof.engine.audit.mutants import corpus, read_reference, selfattest_probes

DEFAULT_CAP = 15  # engine/commands/audit.py's DEFAULT_TIER2_CAP


def draw(folder: Path, seed: int, cap: int) -> dict:
    write(folder, 0)
    tree = folder / "tree"
    files = tuple(f for f in workspace_files(tree) if f.endswith(".py"))
    loop = Loop("bench", "the generated tree", tree, tree, tree,
                Command(("true",), 60.0, literal=True), files, None)
    reference = read_reference(loop)
    start = time.process_time()
    drawn = {t: corpus(loop, reference, t, seed, cap if t == 2 else None) for t in (1, 2)}
    probes = selfattest_probes(loop, reference)
    cpu = time.process_time() - start
    digest = hashlib.sha256()
    for m in [*drawn[1], *drawn[2], *probes]:
        digest.update(f"{m.label}\0{m.key}\n".encode())
    return {"cpu_s": round(cpu, 2), "files": len(files), "tier1": len(drawn[1]),
            "tier2": len(drawn[2]), "probes": len(probes), "sha256": digest.hexdigest()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_draw")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap", type=int, default=DEFAULT_CAP)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="audit-draw-") as tmp:
        got = draw(Path(tmp), args.seed, args.cap)
    print(json.dumps(got) if args.json else
          f"drew {got['tier1']} tier-1 and {got['tier2']} tier-2 mutants and {got['probes']} "
          f"probes of {got['files']} files in {got['cpu_s']} CPU-s ({got['sha256'][:16]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
