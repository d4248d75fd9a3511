"""The transition experiment: correctness is not absorbing ("Looping Is Not Reliability",
Gao et al.), reproduced on HumanEval tasks with an offline coder or any OpenAI-compatible model.

    python -m experiments.transition --json [--scale smoke|default|paper] [--seed S]
                                     [--coder search|openai] [--out DIR]

Three studies, each over the same frozen starts (results/transition/starts.json):

1. trajectories: tasks x 6 evidence conditions x seeds, T forced revisions from a wrong start;
   current vs ever-correct, alpha and beta per condition, lost-after-found, verifier coverage,
   risk and dependence, and the stopping replay (self-report, visible gate, challenge gate);
2. common state: the correct start revised once with a stale trace vs a current trace (harm);
3. prospective paired comparison: baseline loop vs guarded loop (engine.admission.broker) from correct
   and wrong starts, with the same stale-evidence coins in both arms.

Statistics take the task as the unit; six declared contrasts are Holm-corrected. Result files
hold no timings: the same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import results
from experiments.results import write_csv, write_json
from experiments.stats import cluster_mean, holm, task_means
from experiments.transition import arms, metrics, pooling, prospective, verifiers
from experiments.transition.coders import Coder, OpenAICoder, SearchCoder, model_meter
from experiments.transition.conditions import CONDITIONS
from experiments.transition.contrasts import Contrast, declared_contrasts
from experiments.transition.tasks import Task, select_tasks, starts_record
from loopproof.engine.run.meter import BudgetOverrun
from loopproof.engine.system.errors import BadInput
from loopproof.model.executor import Executor, Processes, Serial

NAME = "transition"


@dataclass(frozen=True)
class Scale:
    tasks: int
    seeds: int
    revisions: int = 3
    n_boot: int = 10_000
    n_flips: int = 100_000


SCALES = {"smoke": Scale(3, 2, n_boot=2_000, n_flips=2_000), "default": Scale(10, 3),
          "paper": Scale(30, 5),
          # sized for the 0.5B model on two CPU cores (docs/transition.md): about 15 CPU seconds
          # a call and about 14 distinct calls a task, so 8 tasks need about half an hour of one
          # core, an hour when the model gets half a core
          "llm-smoke": Scale(1, 1, revisions=1, n_boot=2_000, n_flips=2_000),
          "llm": Scale(8, 1),
          # the 1.5B model's run in this artifact (docs/transition.md): about two minutes of a
          # shared core a call, about 14 distinct calls a task at T = 2, so two tasks fit in the
          # hour of model time a session on a shared two-core machine could give it
          "llm-short": Scale(2, 1, revisions=2)}


# --------------------------------------------------------------------------- running
def _coder(spec: dict[str, Any]) -> Coder:
    if spec["kind"] == "search":
        return SearchCoder()
    meter, _records = model_meter(spec["budget"])
    return OpenAICoder(spec["base_url"], spec["model"], meter, price_per_1k=spec["price"],
                       timeout_s=spec.get("timeout_s", 60.0),
                       api_key=os.environ.get("OPENAI_API_KEY") or None)


def run_task(job: tuple[Task, Sequence[int], int, dict[str, Any]]) -> dict[str, list[dict]]:
    """Every run of one task (trajectories, common-state branches, paired arms)."""
    task, seeds, revisions, spec = job
    coder = spec["coder"] if "coder" in spec else _coder(spec)
    out: dict[str, list[dict]] = {"trajectories": [], "common_state": [], "prospective": []}
    for seed in seeds:
        for cond in CONDITIONS:
            out["trajectories"].append(arms.trajectory(task, cond, seed, revisions, coder))
        for cond in ("stale_trace", "current_trace"):
            out["common_state"].append(arms.common_state(task, cond, seed, coder))
        for kind in ("correct", "wrong"):
            out["prospective"].append(arms.baseline_run(task, seed, kind, revisions, coder))
            out["prospective"].append(arms.guarded_run(task, seed, kind, revisions, coder))
    return out


def run_all(tasks: list[Task], seeds: Sequence[int], revisions: int, spec: dict[str, Any],
            workers: int) -> dict[str, list[dict]]:
    if spec.get("kind") == "openai" and "coder" not in spec:
        spec = {**spec, "coder": _coder(spec)}  # one coder, one meter, one budget for the run
    jobs = [(t, tuple(seeds), revisions, spec) for t in tasks]
    # One meter per run: a model coder runs in this process only.
    runs: Executor = Processes(workers) if spec.get("kind") == "search" else Serial()
    parts = runs.map(run_task, jobs)
    merged: dict[str, list[dict]] = {"trajectories": [], "common_state": [], "prospective": []}
    for part in parts:
        for k, rows in part.items():
            merged[k].extend(rows)
    return merged


# --------------------------------------------------------------------------- analysis
def _counts(rows: list[dict], key: str) -> list[int]:
    return [sum(bool(r[key]) for r in rows), len(rows)]


def analyse(runs: dict[str, list[dict]], seed: int, scale: Scale) -> dict[str, Any]:
    traj = runs["trajectories"]
    distinct, same_as = pooling.distinct_conditions(traj, CONDITIONS)
    by_cond = {c: [r for r in traj if r["condition"] == c] for c in CONDITIONS}
    tables = {c: {**metrics.condition_table(rows), "stopping_replay": metrics.stopping_replay(rows)}
              for c, rows in by_cond.items()}
    cs = runs["common_state"]
    stale = [r for r in cs if r["condition"] == "stale_trace"]
    current = [r for r in cs if r["condition"] == "current_trace"]
    pro = runs["prospective"]

    def arm(name: str, start: str | None = None) -> list[dict]:
        return [r for r in pro if r["arm"] == name and (start is None or r["start"] == start)]

    declared = declared_contrasts(by_cond, cs, pro)
    tested = [d.test(seed, scale.n_boot, scale.n_flips) for d in declared]
    adjusted = holm([c["p"] for c in tested])
    contrasts = {d.name: {**c, "p_holm": p_holm}
                 for d, c, p_holm in zip(declared, tested, adjusted, strict=True)}

    def pair(d: Contrast) -> dict[str, Any]:
        c = contrasts[d.name]
        assert d.key is not None
        return {"guarded": _counts(d.a, d.key), "baseline": _counts(d.b, d.key),
                "difference": c["difference"], "ci95": c["ci95"], "ci_method": c["ci_method"],
                "ci95_percentile": c["ci95_percentile"], "p": c["p"], "p_holm": c["p_holm"]}

    named = {d.name: d for d in declared}
    guarded_vs_baseline = {
        "harm_from_correct_starts": pair(named["guarded_vs_baseline_harm"]),
        "repair_from_wrong_starts": pair(named["guarded_vs_baseline_repair"]),
        "unsafe_completion": pair(named["guarded_vs_baseline_unsafe_completion"]),
        "sound_completion": pair(named["guarded_vs_baseline_sound_completion"]),
        "stale_offered": sum(sum(r["offered_stale"]) for r in arm("guarded")),
        "stale_refused": sum(sum(r["refused_stale"]) for r in arm("guarded")),
        "rollouts_per_arm": len(arm("guarded")),
    }
    svc = contrasts["stale_vs_current_harm"]
    k_s, n_s = _counts(stale, "harm")
    k_c, n_c = _counts(current, "harm")
    headline = tables["current_trace"]
    revisions = sum(len(r["y"]) - 1 for r in traj)
    return {
        "trajectories": len(traj), "revisions": revisions,
        "headline_condition": "current_trace",
        "current_correct": headline["current_correct"],
        "ever_correct": headline["ever_correct"],
        # after the last revision, whatever T the scale has (the paper's text reads these)
        "final": {"current_correct": headline["current_correct"][-1],
                  "ever_correct": headline["ever_correct"][-1]},
        "alpha": {c: t["alpha"] for c, t in tables.items()},
        "beta": {c: t["beta"] for c, t in tables.items()},
        "lost_after_found": headline["lost_after_found"],
        "lost_after_found_pooled": metrics.lost_after_found(distinct),
        "conditions_pooled_away": same_as,
        "stale_vs_current_harm": {
            "stale": [k_s, n_s], "current": [k_c, n_c], "difference": svc["difference"],
            "ci95": svc["ci95"], "ci_method": svc["ci_method"], "p": svc["p"],
            "p_holm": svc["p_holm"],
            # each rate over tasks (the unit), not a pooled Wilson interval over correlated runs
            "stale_rate": cluster_mean(task_means(stale, lambda r: r["harm"]), seed=seed,
                                       n_boot=scale.n_boot),
            "current_rate": cluster_mean(task_means(current, lambda r: r["harm"]), seed=seed,
                                         n_boot=scale.n_boot)},
        "replay_intercepts": pooling.replay_intercepts(cs),
        "guarded_vs_baseline": guarded_vs_baseline,
        "pre_specified": prospective.verdict(guarded_vs_baseline),
        # the same criterion on the BCa intervals the report now shows: a sensitivity analysis,
        # reported beside the pre-specified verdict, never instead of it
        "pre_specified_on_bca": prospective.verdict(guarded_vs_baseline, "ci95"),
        "freshness_cost": {"stopping_replay": prospective.fresh_replay(traj),
                           "rollouts": prospective.fresh_rollouts(pro)},
        "validity": {
            "trajectories": {c: metrics.validity(rows) for c, rows in by_cond.items()},
            "common_state": {c: metrics.validity([r for r in cs if r["condition"] == c])
                             for c in ("stale_trace", "current_trace")},
            "prospective": {a: metrics.validity(arm(a)) for a in ("baseline", "guarded")},
            "all": metrics.validity([*traj, *cs, *pro])},
        "verifiers_matched": verifiers.analysis(distinct, seed=seed, n_boot=scale.n_boot),
        "by_condition": tables,
        "verifiers": metrics.verifier_table(distinct),
        "stopping_replay": metrics.stopping_replay(distinct),
        "contrasts": contrasts,
    }


# --------------------------------------------------------------------------- output
def _flat(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, list):
            for i, x in enumerate(v):
                out[f"{k}_{i}"] = x
        else:
            out[k] = v
    return out


def _columns(flat: list[dict]) -> list[str]:
    """Every key of the flattened rows, in first-seen order."""
    cols: list[str] = []
    for r in flat:
        cols.extend(k for k in r if k not in cols)
    return cols


def _sort(rows: list[dict], keys: Sequence[str]) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(str(r[k]) if k != "seed" else f"{r[k]:08d}"
                                            for k in keys))


def run_experiment(*, scale_name: str = "default", seed: int = 0, out: Path | None = None,
                   coder_spec: dict[str, Any] | None = None, workers: int = 2,
                   scale: Scale | None = None,
                   extra: Callable[[], dict[str, str]] | None = None) -> dict[str, Any]:
    """Build the tasks and starts, run the three studies, analyse, write `out`; return the
    summary (what --json prints). `extra`, called after the runs and before anything is
    written, may refuse the run (BadInput) or return more files to write (name -> text)."""
    scale = scale or SCALES[scale_name]
    spec = coder_spec or {"kind": "search"}
    tasks = select_tasks(scale.tasks)
    seeds = [seed + i for i in range(scale.seeds)]
    runs = run_all(tasks, seeds, scale.revisions, spec, workers)
    runs["trajectories"] = _sort(runs["trajectories"], ("task_id", "condition", "seed"))
    runs["common_state"] = _sort(runs["common_state"], ("task_id", "condition", "seed"))
    runs["prospective"] = _sort(runs["prospective"], ("task_id", "start", "arm", "seed"))
    files = extra() if extra is not None else {}
    summary = {"experiment": NAME, "scale": scale_name, "seed": seed,
               "coder": spec.get("label", spec.get("kind", "custom")),
               **({"model": spec["model_name"]} if "model_name" in spec else {}),
               "tasks": [t.task_id for t in tasks],
               "seeds": seeds, "conditions": list(CONDITIONS), "T": scale.revisions,
               **analyse(runs, seed, scale)}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "summary.json", summary)
        write_json(out / "starts.json", starts_record(tasks))
        for name, rows in runs.items():
            write_json(out / f"{name}.json", rows)
            flat = [_flat(r) for r in rows]
            write_csv(out / f"{name}.csv", flat, _columns(flat))
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
    return summary


def _openai_spec(args: argparse.Namespace) -> dict[str, Any]:
    base = args.base_url or os.environ.get("LOOPPROOF_OPENAI_BASE_URL")
    model = args.model or os.environ.get("LOOPPROOF_OPENAI_MODEL")
    if not base:
        raise BadInput("--base-url", "base_url", "no model server given",
                       "pass --base-url http://host:port/v1 or set LOOPPROOF_OPENAI_BASE_URL")
    if not model:
        raise BadInput("--model", "model", "no model name given",
                       "pass --model NAME or set LOOPPROOF_OPENAI_MODEL")
    price_text = args.price if args.price is not None else os.environ.get(
        "LOOPPROOF_OPENAI_PRICE", "0")
    try:
        price = float(price_text)
    except ValueError:
        raise BadInput("--price", "price", f"{price_text!r} is not a number",
                       "give the price per 1,000 tokens, e.g. --price 0.002") from None
    if price < 0 or args.budget <= 0:
        raise BadInput("--price/--budget", "price", "price must be >= 0 and budget > 0",
                       "e.g. --price 0.002 --budget 5")
    return {"kind": "openai", "base_url": base, "model": model, "price": price,
            "budget": args.budget}


def main(argv: list[str] | None = None) -> int:
    p = results.parser(NAME, __doc__.splitlines()[0], SCALES)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.description = __doc__
    p.add_argument("--coder", choices=("search", "openai", "llm"), default="search")
    p.add_argument("--workers", type=int, default=2, help="worker processes (search coder only)")
    p.add_argument("--base-url", help="OpenAI-compatible server (or LOOPPROOF_OPENAI_BASE_URL)")
    p.add_argument("--model", help="model name (or LOOPPROOF_OPENAI_MODEL)")
    p.add_argument("--price", help="price per 1,000 tokens (or LOOPPROOF_OPENAI_PRICE)")
    p.add_argument("--budget", type=float, default=None,
                   help="spend budget for model calls (openai: 10; llm: 100,000 = 100M tokens)")
    p.add_argument("--llm", default="0.5b", help="local model for --coder llm (0.5b or 1.5b)")
    p.add_argument("--replay", type=Path, metavar="DIR",
                   help="--coder llm: answer from DIR/replies.jsonl instead of the model")
    p.add_argument("--model-cache", type=Path,
                   help="weights cache (or LOOPPROOF_MODEL_CACHE; ~/.cache/loopproof/models)")
    p.add_argument("--threads", type=int, default=None,
                   help="--coder llm: CPU threads (default: 2 on an idle machine, else 1)")
    args = results.parse(p, argv)
    if args is None:
        return 2
    if args.coder == "llm":
        return _main_llm(args)
    if args.replay is not None:
        print("experiments.transition: --replay: only for --coder llm; fix: add --coder llm",
              file=sys.stderr)
        return 2
    try:
        if args.budget is None:
            args.budget = 10.0
        spec = {"kind": "search"} if args.coder == "search" else _openai_spec(args)
    except BadInput as exc:
        print(f"experiments.transition: {exc}", file=sys.stderr)
        return 2
    workers = args.workers if args.coder == "search" else 1
    try:
        summary = run_experiment(scale_name=args.scale, seed=args.seed, out=args.out,
                                 coder_spec=spec, workers=workers)
    except BudgetOverrun as exc:
        return _overrun(exc)
    _report(summary, args)
    return 0


def _overrun(exc: BudgetOverrun) -> int:
    print(f"experiments.transition: budget exhausted, nothing written: {exc}; fix: raise "
          f"--budget or lower the scale", file=sys.stderr)
    return 4


def _report(summary: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        results.print_summary(summary, True)  # one line, like every experiment's --json
    else:
        cc = summary["current_correct"]
        print(f"{summary['trajectories']} trajectories, current correct {cc}, ever correct "
              f"{summary['ever_correct']}; results in {args.out}")


def _main_llm(args: argparse.Namespace) -> int:
    """--coder llm: the local model (or its stored replies) behind the OpenAI client path."""
    from experiments.transition import llm_run

    try:
        with llm_run.session(key=args.llm, out=args.out, replay=args.replay,
                             cache=args.model_cache, threads=args.threads,
                             budget=args.budget) as sess:
            summary = run_experiment(scale_name=args.scale, seed=args.seed, out=args.out,
                                     coder_spec=sess.spec, workers=1, extra=sess.finish)
            manifest = llm_run.write_manifest(args.out, sess, summary)
    except BadInput as exc:
        print(f"experiments.transition: {exc}", file=sys.stderr)
        return 2
    except BudgetOverrun as exc:
        return _overrun(exc)
    diff = manifest.get("replies_vs_previous_run")
    if diff is not None:
        print(f"experiments.transition: {diff['compared']} replies compared with the previous "
              f"run in {args.out}: {diff['differed']} differed, {diff['new']} new",
              file=sys.stderr)
    _report(summary, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
