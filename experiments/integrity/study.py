"""The integrity experiment: tamper with real ledgers and pinned files, and check that every
change stops at verification with the right message; tear ledger tails (by a real SIGKILL in
the middle of a write, and by cutting bytes) and check that each is truncated to its last
complete record and that appending resumes to the very ledger an uncrashed run writes.

    python -m experiments.integrity [--scale smoke|default|paper] [--seed S] [--json] [--out DIR]

Ledgers are written by engine.record.ledger.Ledger from synthetic but run-shaped records (run start
with the policy pin, reserve, worker end, verdict, settle, node done, repairs, run end), one
ledger per trial, drawn from the seed. Policies are pinned with engine.policy.pin.PolicyPin.

Three classes of trial, counted separately:
- tamper (counted in `trials`/`detected`): edit a field; edit it and recompute that record's
  hash; delete; reorder; duplicate; splice two ledgers; cut a byte range out mid-chain; garbage
  appended or inserted; a record from another ledger appended; the policy file, a gate file or a
  suite file edited. Detected = `verify` says broken and names the tampered line (or the pin
  names the changed field), and `Ledger.open` refuses without writing a byte.
- torn (`torn_trials`/`torn_recovered`): recovered = verify says torn-tail with the right
  record count, `Ledger.open` truncates to exactly the last complete record, and appending the
  rest of the run gives a ledger byte-identical to the uncrashed one.
- rewrite (`rewrite_trials`): an attacker with write access rewrites the ledger and recomputes
  every hash (edit then re-chain; cut at a record boundary; edit and re-hash the last record).
  The chain alone cannot see these: they are reported as `undetectable_without_signing`, never
  as detected. With an Ed25519-signed head (engine.record.signing) they are `caught_with_signing`.

Writes DIR/trials.csv (one row per trial) and DIR/summary.json. Same seed, same bytes.
"""

from __future__ import annotations

import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments import results
from experiments.integrity.records import COLUMNS, Row
from experiments.integrity.rewrites import REWRITES, rewrite_trial
from experiments.integrity.tamper import (
    LEDGER_TAMPERS,
    ledger_trial,
    pinned_file_trial,
    policy_trial,
)
from experiments.integrity.torn import real_run, real_torn_trial, torn_cut_trial, torn_killed_trial
from experiments.results import write_csv, write_json

NAME = "integrity"
RESULTS = Path("results") / NAME


@dataclass(frozen=True)
class Scale:
    per_kind: int        # tamper trials per kind, on synthetic run ledgers
    torn_killed: int     # torn tails made by SIGKILL inside a write
    torn_cut: int        # torn tails made by cutting bytes
    rewrite_per_kind: int
    real_per_kind: int   # tamper trials per ledger kind on the ledger of a real `loopproof run`
    real_torn: int       # real run ledgers cut mid-write, then `loopproof resume`d


SCALES: dict[str, Scale] = {
    "smoke": Scale(per_kind=1, torn_killed=1, torn_cut=2, rewrite_per_kind=1, real_per_kind=1,
                   real_torn=1),
    "default": Scale(per_kind=6, torn_killed=5, torn_cut=5, rewrite_per_kind=4, real_per_kind=1,
                     real_torn=2),
    "paper": Scale(per_kind=10, torn_killed=8, torn_cut=8, rewrite_per_kind=10, real_per_kind=2,
                   real_torn=4),
}

# ---- the experiment --------------------------------------------------------------------------------

def plan(scale: Scale) -> list[tuple[str, str]]:
    """(class, kind) for every trial, in a fixed order."""
    tamper_kinds = [*LEDGER_TAMPERS, "policy_edited", "gate_file_edited", "suite_file_edited"]
    out = [("tamper", k) for k in tamper_kinds for _ in range(scale.per_kind)]
    out += [("tamper", f"real_run:{k}") for k in LEDGER_TAMPERS for _ in range(scale.real_per_kind)]
    out += [("torn", "sigkill_in_write")] * scale.torn_killed + [("torn", "cut")] * scale.torn_cut
    out += [("torn", "real_run_resume")] * scale.real_torn
    out += [("rewrite", k) for k in REWRITES for _ in range(scale.rewrite_per_kind)]
    return out


def run_trial(index: int, cls: str, kind: str, seed: int, root: Path,
              real: bytes | None = None) -> Row:
    """One trial; `real` is the ledger of a real run, for the real_run:* kinds."""
    rng = random.Random(f"{seed}:{index}:{cls}:{kind}")
    tid = f"{index:03d}-{kind.replace(':', '-')}"
    folder = root / tid
    folder.mkdir()
    if cls == "tamper" and kind in LEDGER_TAMPERS:
        return ledger_trial(tid, kind, rng, folder)
    if kind.startswith("real_run:"):
        if real is None:
            raise ValueError(f"trial {tid} needs the ledger of a real run")
        return ledger_trial(tid, kind.split(":", 1)[1], rng, folder, real=real)
    if kind == "real_run_resume":
        return real_torn_trial(tid, rng, folder)
    if kind == "policy_edited":
        return policy_trial(tid, rng, folder)
    if cls == "tamper":
        return pinned_file_trial(tid, kind, rng, folder)
    if kind == "sigkill_in_write":
        return torn_killed_trial(tid, rng, folder)
    if cls == "torn":
        return torn_cut_trial(tid, rng, folder)
    return rewrite_trial(tid, kind, rng, folder)


def summarise(rows: Sequence[Row]) -> dict:
    tamper = [r for r in rows if r.cls == "tamper"]
    torn = [r for r in rows if r.cls == "torn"]
    rewrite = [r for r in rows if r.cls == "rewrite"]
    by_kind: dict[str, dict[str, int]] = {}
    for r in rows:
        k = by_kind.setdefault(r.kind, {"trials": 0, "ok": 0})
        k["trials"] += 1
        k["ok"] += int(r.detected)
    return {
        "trials": len(tamper),
        "detected": sum(r.detected for r in tamper),
        "torn_trials": len(torn),
        "torn_recovered": sum(r.detected for r in torn),
        "rewrite_trials": len(rewrite),
        "undetectable_without_signing": sum(r.status == "verified" for r in rewrite),
        "caught_with_signing": sum(r.detected for r in rewrite),
        "by_kind": dict(sorted(by_kind.items())),
        "ledgers": "synthetic run-shaped records written by engine.record.ledger.Ledger, and the ledger "
                   "of a real `loopproof run` (real_run:* kinds); torn tails by real SIGKILL "
                   "inside a write, by cut bytes, and by cutting a real run then `loopproof "
                   "resume`",
    }


def write(out: Path, rows: Sequence[Row], summary: dict, scale: str, seed: int) -> None:
    write_csv(out / "trials.csv", (asdict(r) for r in rows), COLUMNS)
    write_json(out / "summary.json", {"scale": scale, "seed": seed, **summary})


def run_experiment(scale: str, seed: int, out: Path, *, sizes: Scale | None = None) -> dict:
    """Run every planned trial (`sizes` overrides the named scale's sizes, for tests)."""
    rows = []
    trials = plan(sizes or SCALES[scale])
    with tempfile.TemporaryDirectory(prefix="integrity-") as tmp:
        real = None
        if any(k.startswith("real_run:") for _, k in trials):
            real = real_run(Path(tmp) / "real-base")[1]
        for i, (cls, kind) in enumerate(trials):
            rows.append(run_trial(i, cls, kind, seed, Path(tmp), real=real))
    summary = summarise(rows)
    write(out, rows, summary, scale, seed)
    return {"scale": scale, "seed": seed, **summary}


def main(argv: Sequence[str] | None = None) -> int:
    p = results.parser("integrity", __doc__.splitlines()[0], SCALES)
    args = results.parse(p, argv)
    if args is None:
        return 2
    summary = run_experiment(args.scale, args.seed, args.out)
    results.print_summary({k: v for k, v in summary.items() if args.json or k != "by_kind"},
                          args.json)
    ok = (summary["detected"] == summary["trials"]
          and summary["torn_recovered"] == summary["torn_trials"]
          and summary["caught_with_signing"] == summary["rewrite_trials"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
