"""The Coq development of proofs/coq/: build it once per source hash, read `Print Assumptions`,
and drive its extracted step function.

Why a build cache: `python -m loopproof.proofs` (the `prover: coq` obligations) and the differential test
(tests/proofs/test_coq_model.py) both need the compiled development and the extracted executable;
compiling once per hash of the sources (and of the coqc and ocamlopt versions) into
`build/coq/<hash>/` makes every later use cost a directory check. A lock keeps concurrent
processes (the proofs' forked jobs, pytest's workers) from building twice.

A theorem counts as proved only if coqc accepted its file and `Print Assumptions` says "Closed
under the global context" (an `Admitted` or an axiom shows up there), and no source holds
`Admitted`, `admit`, `Axiom`, `Parameter` or `Conjecture` (a `Variable` or `Hypothesis` of a
`Section` is no assumption: it becomes a premise of every theorem that uses it when the section
ends).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCE_DIR = Path(__file__).resolve().parent / "coq"  # package data in an installed wheel


def _cache() -> Path:
    """build/coq/ of the checkout; from an installed wheel, the user's cache (site-packages may
    be read-only); LOOPPROOF_CACHE overrides both."""
    if os.environ.get("LOOPPROOF_CACHE"):
        return Path(os.environ["LOOPPROOF_CACHE"]) / "coq"
    root = SOURCE_DIR.parents[1]
    if (root / "pyproject.toml").is_file() and (root / "loopproof").is_dir():
        return root / "build" / "coq"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "loopproof" / "coq"


CACHE = _cache()
VERNAC = ("Loopproof.v", "Bound.v", "Ceiling.v", "Tight.v", "Broken.v", "Concurrent.v",
          "ConcurrentBound.v", "Serial.v", "Terminates.v", "BrokenConcurrent.v",
          "Extract.v")  # dependency order
DRIVER = "driver.ml"
THEOREMS = ("loopproof_W_bound", "loopproof_structural", "loopproof_G3", "loopproof_G3_ceiling",
            "loopproof_W_tight",
            "loopproof_W_bound_concurrent", "loopproof_G3_concurrent",
            "loopproof_serial_instance", "loopproof_serial_runs_concurrent",
            "loopproof_W_tight_concurrent", "loopproof_terminates",
            "broken_cancel_done_exceeds_W", "broken_begin_ignores_needs_starts_early",
            "broken_settle_tolerant_overspends",
            "broken_ceiling_unchecked_exceeds_c",
            "broken_check_then_reserve_overspends", "broken_check_then_admit_overcommits",
            "broken_repair_in_flight_overcommits", "broken_per_node_repairs_runs_forever")
FORBIDDEN = re.compile(r"\b(Admitted|admit|Axiom|Axioms|Parameter|Conjecture)\b")
CLOSED = "Closed under the global context"


class CoqUnavailable(RuntimeError):
    """coqc or ocamlopt is missing, or the development does not build."""


@dataclass(frozen=True)
class Build:
    directory: Path
    assumptions: dict[str, str]  # theorem -> what Print Assumptions printed
    seconds: float  # CPU seconds of the build that made this directory (0 if it was cached)

    @property
    def executable(self) -> Path:
        return self.directory / "loopproof_coq"

    def closed(self, theorem: str) -> bool:
        return self.assumptions.get(theorem, "").strip() == CLOSED


def _version(tool: str) -> str:
    if shutil.which(tool) is None:
        raise CoqUnavailable(f"{tool} is not installed; fix: run `make coq` (Debian's coq and "
                             "ocaml packages)")
    return _printed_version(tool)


@functools.cache
def _printed_version(tool: str) -> str:
    """What `tool` says its version is, asked once per process: every build, every run of the
    extracted code and every digest of a kept report hashes it (a process each time, as long
    as the check itself), and a tool is not replaced under a running process."""
    flag = "--version" if tool == "coqc" else "-version"
    return subprocess.run([tool, flag], capture_output=True, text=True, check=True).stdout


def source_hash() -> str:
    h = hashlib.sha256()
    for tool in ("coqc", "ocamlopt"):
        h.update(_version(tool).encode())
    for name in (*VERNAC, DRIVER):
        h.update(name.encode() + b"\0" + (SOURCE_DIR / name).read_bytes() + b"\0")
    return h.hexdigest()[:20]


def forbidden(text: str) -> list[str]:
    """The forbidden words in Coq source `text`, comments removed."""
    return FORBIDDEN.findall(re.sub(r"\(\*.*?\*\)", "", text, flags=re.S))


def build() -> Build:
    """The compiled development for today's sources: built now, or found in the cache."""
    key = source_hash()
    target = CACHE / key
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "assumptions.json").exists():
            _build_into(target)
    data = json.loads((target / "assumptions.json").read_text())
    return Build(target, data["assumptions"], data["seconds"])


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CoqUnavailable(f"`{' '.join(argv)}` failed in proofs/coq/:\n"
                             f"{(done.stdout + done.stderr).strip()}")
    return done.stdout


def _assumptions(work: Path) -> dict[str, str]:
    """What `Print Assumptions` prints of each theorem. Each print walks every proof the theorem
    rests on (about 0.5 CPU s apiece here, the lia proofs' terms being large), so the theorems
    are first printed together, as one tuple: its assumptions are the union of theirs, so
    "Closed" there is "Closed" for each. Anything else, and each is printed alone."""
    imports = ("From Loopproof Require Import "
               + " ".join(name[:-2] for name in VERNAC if name != "Extract.v") + ".\n")
    (work / "Together.v").write_text(
        imports + f"Definition loopproof_theorems := ({', '.join(THEOREMS)}).\n"
        'Redirect "assume-together" Print Assumptions loopproof_theorems.\n')
    _run(["coqc", "-q", "-Q", ".", "Loopproof", "Together.v"], work)
    if (work / "assume-together.out").read_text().strip() == CLOSED:
        return dict.fromkeys(THEOREMS, CLOSED)
    (work / "Assumptions.v").write_text(
        imports + "".join(f'Redirect "assume-{t}" Print Assumptions {t}.\n' for t in THEOREMS))
    _run(["coqc", "-q", "-Q", ".", "Loopproof", "Assumptions.v"], work)
    return {t: (work / f"assume-{t}.out").read_text().strip() for t in THEOREMS}


def _build_into(target: Path) -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for name in VERNAC:
        if bad := forbidden((SOURCE_DIR / name).read_text()):
            raise CoqUnavailable(f"proofs/coq/{name} uses {', '.join(sorted(set(bad)))}; fix: "
                                 "prove the lemma (nothing may be assumed)")
    work = Path(tempfile.mkdtemp(prefix="coq-", dir=CACHE))
    try:
        for name in (*VERNAC, DRIVER):
            shutil.copy(SOURCE_DIR / name, work / name)
        for name in VERNAC:
            _run(["coqc", "-q", "-Q", ".", "Loopproof", name], work)
        assumptions = _assumptions(work)
        _run(["ocamlopt", "-alert", "-deprecated", "-o", "loopproof_coq", "extracted.mli",
              "extracted.ml", DRIVER], work)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2)
        (work / "assumptions.json").write_text(json.dumps(
            {"assumptions": assumptions, "seconds": seconds}, indent=2, sort_keys=True))
        if target.exists():
            shutil.rmtree(target)
        work.rename(target)
        for old in CACHE.iterdir():  # builds of earlier sources
            if old.is_dir() and old != target and not old.name.startswith("coq-"):
                shutil.rmtree(old, ignore_errors=True)
    finally:
        if work.exists():
            shutil.rmtree(work)


def drive(cases_text: str) -> list[dict[str, Any]]:  # JSON from proofs/coq/driver.ml
    """Run the extracted code on cases in driver.ml's input format: one result per case."""
    done = subprocess.run([str(build().executable)], input=cases_text, capture_output=True,
                          text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
