"""The rule table against the hand-written rules it replaced, side by side: the same measurements
on this checkout and on a baseline revision (`--rules-base`, default the last commit before the
table), alternated round by round on one machine, reported as ratios (this / baseline).

- proofs: CPU seconds of every Z3 obligation both trees hold, discharged in one process (the
  Coq ones are left out: the table does not touch them), with each tree's results and
  counterexamples, which must be the same;
- step: CPU microseconds per `model.step` over a 3,000-node chain's run (what replaying a ledger
  costs per record);
- explorer: CPU seconds of the explorer's fast search of one 4-node task (a chain, every
  relation and K);
- import: wall seconds of `import loopproof.model`.

Registered as "rule_table"; `python -m bench --only rule_table`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.child import best
from bench.registry import register

REPO = Path(__file__).resolve().parent.parent
BASE = "09354cc"  # the last commit before the rule table

PROBE = r'''
import json, sys, time
what = sys.argv[1]
out = {}
if what == "proofs":
    from loopproof.proofs.obligations import OBLIGATIONS, discharge
    for ob in OBLIGATIONS:
        if ob.prover == "z3":
            t = time.process_time()
            r = discharge(ob)
            cex = r.counterexample.to_json() if r.counterexample is not None else None
            out[ob.id] = [time.process_time() - t, r.result, cex]
elif what == "step":
    from loopproof.model import Begin, Claim, Finish, LoopGraph, NodeSpec, Reserve, Settle
    from loopproof.model import Verdict, initial_state, step
    n = 3000
    g = LoopGraph.build([NodeSpec(f"n{i}", spend_ceiling=2.0, needs=(f"n{i-1}",) if i else ())
                         for i in range(n)], spend_budget=4.0 * n)
    s, t = initial_state(g), time.process_time()
    for i in range(n):
        for e in (Begin(f"n{i}"), Reserve(1.0), Settle(0.5), Claim(f"n{i}"),
                  Verdict(f"n{i}", True)):
            s = step(g, s, e)
    s = step(g, s, Finish())
    out["us_per_step"] = (time.process_time() - t) / (5 * n + 1) * 1e6
elif what == "explorer":
    from loopproof.model.explore import Task, run_task
    t = time.process_time()
    r = run_task(Task(4, ((0, 1), (1, 2), (2, 3)), (2, 1, 1, 2)))
    out["cpu_s"], out["states"], out["mismatches"] = time.process_time() - t, r.states, r.mismatches
print(json.dumps(out))
'''


def _tree(rev: str, into: Path) -> Path:
    """The checkout of `rev`, as files (git archive)."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _probe(tree: Path, what: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, what], cwd=tree, capture_output=True,
                          text=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} in {tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def compare(base_rev: str = BASE, rounds: int = 2) -> dict:
    with tempfile.TemporaryDirectory(prefix="loopproof-rules-") as tmp:
        trees = {"baseline": _tree(base_rev, Path(tmp) / "base"), "table": REPO}
        got: dict[str, dict[str, list[dict]]] = {k: {} for k in trees}
        for _ in range(rounds):  # alternated, so a change in the machine's load hits both
            for name, tree in trees.items():
                for what in ("proofs", "step", "explorer"):
                    got[name].setdefault(what, []).append(_probe(tree, what))
        imports = {name: best([sys.executable, "-c", "import loopproof.model"], 5 * rounds,
                              cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}
                              ).wall_s for name, tree in trees.items()}
    base_p, table_p = got["baseline"]["proofs"], got["table"]["proofs"]
    both = sorted(set(base_p[0]) & set(table_p[0]))
    cpu = {name: sum(min(r[i][0] for r in got[name]["proofs"]) for i in both) for name in trees}
    differ = [i for i in both if base_p[0][i][1:] != table_p[0][i][1:]]
    step = {n: min(r["us_per_step"] for r in got[n]["step"]) for n in trees}
    explore = {n: min(r["cpu_s"] for r in got[n]["explorer"]) for n in trees}
    return {
        "baseline": base_rev, "rounds": rounds, "z3_obligations": len(both),
        "proofs_cpu_s": {k: round(v, 2) for k, v in cpu.items()},
        "proofs_ratio": round(cpu["table"] / cpu["baseline"], 3),
        "results_or_counterexamples_differ": differ,
        "step_us": {k: round(v, 2) for k, v in step.items()},
        "step_ratio": round(step["table"] / step["baseline"], 3),
        "explorer_cpu_s": {k: round(v, 3) for k, v in explore.items()},
        "explorer_ratio": round(explore["table"] / explore["baseline"], 3),
        "explorer_same_result": got["table"]["explorer"][0]["states"]
        == got["baseline"]["explorer"][0]["states"],
        "import_model_s": {k: round(v, 3) for k, v in imports.items()},
        "import_ratio": round(imports["table"] / imports["baseline"], 3),
    }


def bench_rule_table(args: argparse.Namespace) -> dict:
    return compare(getattr(args, "rules_base", BASE), getattr(args, "rules_rounds", 2))


register("rule_table", bench_rule_table)


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.rule_table", description=__doc__.split(
        "\n")[0])
    p.add_argument("--rules-base", default=BASE)
    p.add_argument("--rules-rounds", type=int, default=2)
    print(json.dumps(bench_rule_table(p.parse_args()), indent=1, sort_keys=True))
