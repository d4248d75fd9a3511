"""`make reproduce`: every result of the project, one step at a time, with an estimate first
and one line per step with its elapsed time.

    python -m experiments.reproduce [--scale default] [--seed 0] [--dry-run]

Why a driver instead of a list of Make lines: the estimate needs the steps as data, and each
step's line needs its time. Estimates are seconds on two idle cores at the scale asked for: the
durations of the last completed run at that scale when results/reproduce.json holds one, else
each step's default-scale figure times its study's work at that scale (`WORK`: a step that takes
no --scale costs the same at every scale). A step that fails stops the run (exit 1) after saying
which; `--dry-run` prints the plan only.

One line per step: its name, its elapsed time and its headline figure (read from what it
printed or wrote); everything a step prints goes to results/logs/<step>.log, so the screen
shows one line a step and nothing is lost. The examples' run reports and the median audit are
also kept as result files (results/examples/<name>.json; results/audit/median.json, the audit of
examples/median-command's weak gate) for the
paper, which is the last step (`python -m paper --pdf`: paper/build/loopproof.pdf).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
TIMES = Path("results/reproduce.json")


LOGS = Path("results/logs")


# Each study's work at a scale, relative to default (from its SCALES: units of work, e.g. seeds x
# sites, graphs, trajectories x revisions). A scale not listed costs what default costs.
WORK: dict[str, dict[str, float]] = {
    "smoke": {"bounds": 0.05, "integrity": 0.2, "crash": 0.1, "transition": 0.2, "mutants": 0.2,
              "growth": 0.1},
    "paper": {"bounds": 1.6, "integrity": 2.0, "crash": 5.0, "transition": 5.0, "mutants": 3.0,
              "growth": 3.0},
}


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]
    estimate_s: float  # on two idle cores at default scale
    ok_codes: tuple[int, ...] = (0,)
    headline: Callable[[str], str] | None = None  # its figure, from its output (stdout)
    save: str | None = None  # a result file the step's stdout (its --json report) is kept in
    skip: Callable[[], str] | None = None  # why the step is skipped this time ("" to run it)

    @property
    def study(self) -> str | None:
        """The experiment whose `--scale` this step passes on (None: the step has no scale)."""
        if "--scale" not in self.argv:
            return None
        return next((a.split(".", 1)[1] for a in self.argv if a.startswith("experiments.")), None)

    def estimate(self, scale: str) -> float:
        return self.estimate_s * (WORK.get(scale, {}).get(self.study, 1.0) if self.study else 1.0)

    @property
    def log(self) -> Path:
        return LOGS / (re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-") + ".log")


def _last_json(out: str) -> dict:
    for line in reversed(out.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    try:
        value = json.loads(out)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _run_line(out: str) -> str:
    r = _last_json(out)
    return (f"{r.get('outcome')}: {r.get('attempts_total')} attempts of W = {r.get('W')}, "
            f"spend {r.get('spend', {}).get('settled')} of B = {r.get('spend', {}).get('budget')}"
            if r else "")


def _proofs(out: str) -> str:
    return next((ln for ln in out.splitlines() if "obligations" in ln), "").strip()


def _keys(*keys: str) -> Callable[[str], str]:
    """A headline of the named fields of the step's JSON summary, `k=v` each."""
    def pick(out: str) -> str:
        r = _last_json(out)
        return ", ".join(f"{k.rsplit('.', 1)[-1]} {_get(r, k)}" for k in keys
                         if _get(r, k) is not None)
    return pick


def _get(d: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def _audit(out: str) -> str:
    t2 = _get(_last_json(out), "summary.tiers.2") or {}
    return (f"tier 2: {t2.get('false_accepts')} false accepts of {t2.get('destroying')} "
            f"destroying ({t2.get('equivalent')} equivalent, {t2.get('undetermined')} "
            f"undetermined)" if t2 else "")


def _mutants(out: str) -> str:
    r = _last_json(out)
    tiers = [(t, _get(r, f"after.tier{t}"), _get(r, f"before.tier{t}")) for t in (1, 2)]
    return "; ".join(f"tier {t}: {a['false_accepts']} false accepts of {a['destroying']} "
                     f"destroying after repair ({b['false_accepts']} of {b['destroying']} before)"
                     for t, a, b in tiers if isinstance(a, dict) and isinstance(b, dict))


def _growth(out: str) -> str:
    r = _last_json(out)
    acc, crash = r.get("accounting") or {}, r.get("crash") or {}
    rounds = _get(r, "contrasts.round_attainment") or {}
    if not acc or not crash or not rounds:
        return ""
    return (f"{acc.get('within_policy')}/{acc.get('runs')} runs within policy, crash "
            f"{crash.get('outcome_recovered')}/{crash.get('cases')} recovered, rounds raise "
            f"attainment by {rounds.get('difference')} (p {rounds.get('p')})")


def _bench(out: str) -> str:
    """`python -m bench --json` prints its report (the "N figures met" line goes to stderr):
    count the figures, each a table with a verdict, and name the missed ones."""
    try:
        report = json.loads(out)
    except ValueError:
        return ""
    verdicts: dict[str, str] = {}

    def walk(name: str, value: object) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("verdict"), str):
                verdicts[name] = value["verdict"]
            for key, sub in value.items():
                walk(f"{name}.{key}" if name else str(key), sub)

    walk("", report)
    missed = sorted(n for n, v in verdicts.items() if v == "missed")
    met = sum(v == "met" for v in verdicts.values())
    return (f"{met} figures met their target, {len(missed)} missed"
            + (f" ({', '.join(missed)})" if missed else ""))


def _figures(out: str) -> str:
    done = [ln.split(":", 1)[0] for ln in out.splitlines() if "executed in" in ln]
    return f"{len(done)} notebooks executed ({', '.join(done)}) -> results/notebooks/"


def _reference(out: str) -> str:
    return next((ln.removeprefix("python -m paper.reference: ") for ln in out.splitlines()
                 if ln.startswith("python -m paper.reference:")), "")


MODEL_RUN = Path("results/transition-llm/manifest.json")


def _model_run_kept() -> str:
    """A model run (make reproduce-llm) in results/transition-llm is not replaced by the replay
    of the stored llm-smoke replies."""
    try:
        mode = json.loads(MODEL_RUN.read_text()).get("mode")
    except (OSError, ValueError, AttributeError):
        return ""
    return f"skipped: {MODEL_RUN.parent} holds a model run (make reproduce-llm)" if (
        mode == "model") else ""


def _paper(out: str) -> str:
    return next((ln.removeprefix("python -m paper: ") for ln in reversed(out.splitlines())
                 if ln.startswith("python -m paper:") and ".pdf" in ln), "")


REFERENCE = Path(__file__).resolve().parent.parent / "reference-results"
SMOKE_REPLIES = "experiments/transition/replies/llm-smoke"


def recorded(folder: Path) -> tuple[str, str, str] | None:
    """(model key, scale, seed) of the model run whose replies `folder` keeps, read from its
    manifest and summary; None when it holds none."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        summary = json.loads((folder / "summary.json").read_text())
        if not (folder / "replies.jsonl").is_file():
            return None
        return str(manifest["model"]["key"]), str(summary["scale"]), str(summary["seed"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def model_replays() -> list[Step]:
    """Replay steps for the model runs of the reference copy: the competence checks, then the
    transition run (or, when the copy keeps none, the stored llm-smoke replies)."""
    py = str(BIN / "python")
    out: list[Step] = []
    for key in ("0.5b", "1.5b"):
        rec = recorded(REFERENCE / f"competence-{key}")
        if rec is not None:
            out.append(Step(f"competence {key}, model replies replayed", (
                py, "-m", "experiments.transition.competence", "--llm", rec[0], "--replay",
                str(REFERENCE / f"competence-{key}"), "--scale", rec[1], "--seed", rec[2],
                "--out", f"results/competence-{key}"), 10,
                headline=lambda out: out.strip().splitlines()[-1] if out.strip() else ""))
    rec = recorded(REFERENCE / "transition-llm")
    source, (key, scale, seed) = (str(REFERENCE / "transition-llm"), rec) if rec else (
        SMOKE_REPLIES, ("1.5b", "llm-smoke", "0"))
    out.append(Step("transition, model replies replayed", (
        py, "-m", "experiments.transition", "--coder", "llm", "--llm", key, "--replay", source,
        "--scale", scale, "--seed", seed, "--out", str(MODEL_RUN.parent), "--json"), 15,
        headline=_keys("trajectories", "revisions", "scale"), skip=_model_run_kept))
    return out


def steps(scale: str, seed: int) -> list[Step]:
    py, lp = str(BIN / "python"), str(BIN / "loopproof")
    s = ("--scale", scale, "--seed", str(seed), "--json")
    ex = "results/examples"
    run = [Step(f"example {name}", (lp, "run", f"examples/{name}/graph.toml", "--ledger",
                                    f"{ex}/{name}.jsonl", "--json"), 2, codes, _run_line,
                save=f"{ex}/{name}.json")
           for name, codes in (("pipeline", (0,)), ("repair", (0,)), ("budget", (0, 4)),
                               ("regress-restore", (0,)), ("median", (0,)),
                               ("median-command", (0,)))]
    return [
        # estimates: a fresh clone's run on 2 idle cores (load 1-3), rounded up
        Step("proofs", (py, "-m", "loopproof.proofs", "--out", "results/proofs/proofs.json"), 10,
             headline=_proofs),
        Step("bounds (explorer, random graphs)", (py, "-m", "experiments.bounds", *s), 35,
             headline=_keys("explorer_cases", "explorer_mismatches", "worst_equals_w",
                            "random_graphs")),
        *run,
        Step("audit of examples/median-command's gate",
             (lp, "audit", "examples/median-command/graph.toml", "--ledger",
              f"{ex}/median-command.jsonl", "--json"),
             5, headline=_audit, save="results/audit/median.json"),
        Step("integrity", (py, "-m", "experiments.integrity", *s), 5,
             headline=_keys("detected", "trials", "torn_recovered", "torn_trials")),
        Step("crash", (py, "-m", "experiments.crash", *s), 25,
             headline=_keys("cases", "outcome_recovered", "budget_violations", "lost_verdicts")),
        Step("transition", (py, "-m", "experiments.transition", *s), 20,
             headline=_keys("trajectories", "revisions")),
        # the local model's runs kept in reference-results/ (make reproduce-llm), replayed from
        # their stored replies without the model: the same figures, byte for byte
        *model_replays(),
        Step("mutants", (py, "-m", "experiments.mutants", *s), 90, headline=_mutants),
        Step("growth", (py, "-m", "experiments.growth", *s), 20, headline=_growth),
        # the quick bench (`make bench` is the full one): every figure beside its target, at the
        # sizes where a rate or a ratio shows it, without the explorer and the proofs (the steps
        # above time them) and the newcomer's path (the README's table)
        Step("bench", (py, "-m", "bench", "--json", "--quick"), 115, headline=_bench),
        Step("notebooks and figures", (py, "-m", "experiments.figures", "--results", "results"),
             20, headline=_figures),
        # the committed copy (reference-results/): this run against it, then the studies whose
        # figures moved refreshed from it (a rerun that reproduces them changes no tracked file);
        # the paper and docs/results.md are built from the copy
        Step("reference copy", (py, "-m", "paper.reference", "--update", "results"), 3,
             headline=_reference),
        Step("paper", (py, "-m", "paper", "--pdf"), 5, headline=_paper),
    ]


def relative_to_checkout(report: str, root: Path | None = None) -> str:
    """A step's JSON report with the checkout's absolute path taken off every path under it
    (`"ledger": "results/examples/pipeline.jsonl"`): the result file is then the same on every
    clone, and the committed copy names no machine's folder."""
    prefix = json.dumps(str((root or Path.cwd()).resolve()) + os.sep)[1:-1]
    return report.replace(prefix, "")


def _last_runs() -> dict[str, dict[str, float]]:
    """results/reproduce.json: {scale: {step: seconds}} (an older file, one flat map, was a run
    at default scale)."""
    try:
        last = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(last, dict):
        return {}
    if last and all(isinstance(v, int | float) for v in last.values()):
        return {"default": last}
    return {k: v for k, v in last.items() if isinstance(v, dict)}


def _estimates(plan: list[Step], scale: str) -> tuple[dict[str, float], bool]:
    """Seconds per step at `scale`, and whether they are the last run's at that scale."""
    last = _last_runs().get(scale, {})
    timed = bool(last) and all(st.name in last for st in plan)
    return {st.name: float(last[st.name]) if timed else st.estimate(scale) for st in plan}, timed


def _children_cpu() -> float:
    """CPU seconds of every finished child (and the children they waited for): a loaded machine
    stretches a step's elapsed time, much less its CPU time."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.reproduce", description=__doc__.split(
        "\n")[0])
    p.add_argument("--scale", default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="print the plan and the estimate only")
    args = p.parse_args(argv)
    plan = steps(args.scale, args.seed)
    est, timed = _estimates(plan, args.scale)
    total = sum(est.values())
    print(f"reproduce: {len(plan)} steps, about {total / 60:.0f} min on 2 idle cores "
          f"({'the last run at this scale' if timed else 'estimate'}); scale {args.scale}, "
          f"seed {args.seed}", flush=True)
    if args.dry_run:
        for st in plan:
            print(f"  {st.name:36s} ~{est[st.name]:6.0f} s  {' '.join(st.argv)}")
        return 0
    for folder in ("results/examples", "results/audit"):
        shutil.rmtree(folder, ignore_errors=True)
    Path("results/examples").mkdir(parents=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    took: dict[str, float] = {}
    start = time.perf_counter()
    for i, st in enumerate(plan, 1):
        if st.skip and (why := st.skip()):
            print(f"[{i:2d}/{len(plan)}] {st.name:34s} {why}", flush=True)
            took[st.name] = 0.0
            continue
        t, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run(st.argv, capture_output=True, text=True,
                              env=dict(os.environ, MPLBACKEND="Agg"))
        took[st.name] = round(time.perf_counter() - t, 1)
        cpu_s = round(_children_cpu() - cpu, 1)
        st.log.write_text(f"$ {' '.join(st.argv)}\n# exit {done.returncode}, "
                          f"{took[st.name]} s, {cpu_s} CPU-s\n{done.stdout}\n# stderr\n"
                          f"{done.stderr}")
        ok = done.returncode in st.ok_codes
        if ok and st.save:  # the step's report, kept as a result file (the paper reads it)
            Path(st.save).parent.mkdir(parents=True, exist_ok=True)
            Path(st.save).write_text(relative_to_checkout(done.stdout))
        try:
            figure = (st.headline(done.stdout) if st.headline and ok else "") or ""
        except Exception:  # noqa: BLE001 - a headline that cannot be read is no reason to stop
            figure = ""
        mark = figure or "ok" if ok else f"FAILED (exit {done.returncode}), see {st.log}"
        print(f"[{i:2d}/{len(plan)}] {st.name:34s} {took[st.name]:6.1f} s {cpu_s:6.1f} CPU-s  "
              f"{mark}", flush=True)
        if not ok:
            print(f"reproduce: stopped at {st.name!r} after {(time.perf_counter() - start) / 60:.1f}"
                  f" min; its output is in {st.log}; rerun: {' '.join(st.argv)}",
                  file=sys.stderr)
            return 1
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps(_last_runs() | {args.scale: took}, indent=2, sort_keys=True)
                     + "\n")
    print(f"reproduce: all {len(plan)} steps in {(time.perf_counter() - start) / 60:.1f} min "
          f"(estimated {total / 60:.0f} min; {sum(took.values()) / 60:.1f} min in the steps); "
          f"results in results/, each step's output in {LOGS}/, executed notebooks in "
          f"results/notebooks/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
