"""The competence check of a local model: pass@1 from scratch on the transition study's tasks,
through the same server, client, prompt and reply parser as the study itself.

Why: a model arm that never repairs anything says nothing about the mechanism if the model
cannot write the functions at all. Each task is asked once, greedily (temperature 0), with the
task's prompt as the current solution.py (signature and docstring, no body) and no evidence;
the reply goes through `OpenAICoder.parse` (so a refused reply counts as a failure, with its
class), and the result is judged correct on the visible, challenge and hidden suites together,
as the study's Y is.

    python -m experiments.transition.competence [--llm 0.5b|1.5b] [--scale llm] [--seed S]
                                                [--out DIR] [--replay DIR] [--threads N] [--json]

writes DIR/summary.json (pass@1 with its exact Clopper-Pearson 95% interval, one row per task),
DIR/replies.jsonl and DIR/manifest.json, like a `--coder llm` run; `--replay DIR` answers from
DIR/replies.jsonl without the model and writes the same summary bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from experiments.results import json_text, write_json
from experiments.transition.coders import OpenAICoder, Reply, Request, model_meter, patched_source
from experiments.transition.edits import normalize
from experiments.transition.study import SCALES
from experiments.transition.tasks import Task, correct, select_tasks
from loopproof.engine.run.meter import BudgetOverrun
from loopproof.engine.system.errors import BadInput

NAME = "competence"


def stub(task: Task) -> str:
    """The from-scratch file: the task's prompt (imports, signature, docstring), no body."""
    return normalize(task.prompt)


def score(task: Task, reply: Reply) -> dict[str, Any]:
    """One task's row: whether the reply was a valid action, why not, and whether the code it
    produced passes every suite (a Keep, an Escalate or a refused reply fails)."""
    new = patched_source(reply.action)
    passed = new is not None and correct(task, new)
    return {"task": task.task_id, "valid": reply.valid, "why": reply.why,
            "action": type(reply.action).__name__.lower(), "passed": bool(passed)}


def summarize(rows: list[dict[str, Any]], *, model: str, scale: str, seed: int) -> dict[str, Any]:
    """pass@1 over the rows with its exact (Clopper-Pearson) 95% interval."""
    n, k = len(rows), sum(r["passed"] for r in rows)
    if n:
        # imported here: scipy.stats is ~2 CPU-s, which every process importing this module
        # (each test worker, at collection) paid for an interval only a summary needs
        from scipy.stats import binomtest

        ci = binomtest(k, n).proportion_ci(0.95, method="exact")
        interval: list[float] | None = [round(float(ci.low), 4), round(float(ci.high), 4)]
    else:
        interval = None
    invalid: dict[str, int] = {}
    for r in rows:
        if not r["valid"]:
            invalid[r["why"]] = invalid.get(r["why"], 0) + 1
    return {"experiment": NAME, "model": model, "scale": scale, "seed": seed, "tasks": n,
            "passed": k, "pass_at_1": round(k / n, 4) if n else None,
            "pass_at_1_ci95": interval, "interval_method": "exact (Clopper-Pearson)",
            "valid_replies": sum(r["valid"] for r in rows), "invalid": dict(sorted(invalid.items())),
            "sampling": "greedy (temperature 0), one reply per task", "rows": rows}


def run(tasks: list[Task], spec: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    meter, _ = model_meter(spec["budget"])
    coder = OpenAICoder(spec["base_url"], spec["model"], meter, price_per_1k=spec["price"],
                        timeout_s=spec.get("timeout_s", 60.0))
    rows = []
    for task in tasks:
        rows.append(score(task, coder.revise(Request(task, stub(task), None, seed=seed))))
    return rows


def line(s: dict[str, Any]) -> str:
    ci = s["pass_at_1_ci95"]
    return (f"competence {s['model']}: pass@1 {s['passed']}/{s['tasks']} = {s['pass_at_1']} "
            f"[{ci[0]}, {ci[1]}] exact 95%, from scratch, {s['valid_replies']} valid replies "
            f"(scale {s['scale']}, seed {s['seed']})" if ci else f"competence {s['model']}: no task")


def main(argv: list[str] | None = None) -> int:
    from experiments.transition import llm_run

    p = argparse.ArgumentParser(prog="python -m experiments.transition.competence",
                                description=__doc__.splitlines()[0])
    p.add_argument("--llm", default="0.5b")
    p.add_argument("--scale", choices=sorted(SCALES), default="llm")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    p.add_argument("--replay", type=Path, metavar="DIR")
    p.add_argument("--model-cache", type=Path)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = args.out or Path("results") / f"{NAME}-{args.llm}"
    if out.exists() and not out.is_dir():
        print(f"{p.prog}: --out {out}: is a file, not a directory; fix: name a directory",
              file=sys.stderr)
        return 2
    tasks = select_tasks(SCALES[args.scale].tasks)
    try:
        with llm_run.session(key=args.llm, out=out, replay=args.replay, cache=args.model_cache,
                             threads=args.threads) as sess:
            rows = run(tasks, sess.spec, args.seed)
            files = sess.finish()
            summary = summarize(rows, model=sess.w.general_name, scale=args.scale,
                                seed=args.seed)
            out.mkdir(parents=True, exist_ok=True)
            write_json(out / "summary.json", summary)
            for name, text in files.items():
                (out / name).write_text(text, encoding="utf-8")
            llm_run.write_manifest(out, sess, {"experiment": NAME, "scale": args.scale,
                                               "seed": args.seed})
    except BadInput as exc:
        print(f"experiments.transition.competence: {exc}", file=sys.stderr)
        return 2
    except BudgetOverrun as exc:
        print(f"experiments.transition.competence: budget exhausted, nothing written: {exc}",
              file=sys.stderr)
        return 4
    print(json_text(summary).rstrip() if args.json else line(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
