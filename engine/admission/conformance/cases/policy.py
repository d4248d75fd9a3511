"""Conformance cases, G6 and the run's pins: the policy is pinned at start and checked before
every stage, lies outside every worker's folder, bounds the graph's budgets and decides release;
a file a gate depends on is pinned too.

Each runs a real one- or two-node run (spec.load + Runner, as `loopproof run`) with a shell
worker and gate. A worker that edits a file outside its folder is the environment changing it
(the run has no sandbox here: with one, the worker could not reach the file at all, and the
check would not be what stops it).
"""

from __future__ import annotations

import json
from pathlib import Path

from loopproof.engine.admission.conformance.cases.registry import case
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load as load_spec
from loopproof.engine.system.errors import BadInput

POLICY = """\
[policy]
goals = ["every node DONE with a PASS verdict"]
scope = ["."]
[gate]
files = ["{check}"]
[budget]
spend = 60.0
repairs = 0
[release]
conditions = {conditions}
{extra}
"""


def _run(tmp: Path, *, a_does: str = "true", conditions: tuple[str, ...] = ("all_done",),
         extra: str = "", budget: float = 10.0, policy_at: Path | None = None,
         gate_pin: bool = False) -> tuple[int | None, list[dict], str]:
    """A run of nodes a then b (b needs a), each touching out.txt, judged by `sh check.sh`;
    `a_does` runs in a's worker first. Returns (exit code, ledger records, the refusal of a bad
    set-up when the run did not start)."""
    (tmp / "check.sh").write_text("test -f out.txt\n")
    policy = policy_at or tmp / "policy.toml"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(POLICY.format(conditions=json.dumps(list(conditions)), extra=extra,
                                 check=tmp / "check.sh"))
    gate_files = 'gate_files = ["dep.txt"]\n' if gate_pin else ""
    (tmp / "dep.txt").write_text("v1\n")
    spec = tmp / "graph.toml"
    spec.write_text(
        f'[graph]\nspend_budget = {budget}\npolicy = "{policy}"\nsandbox = "none"\n'
        f'[node.a]\nworker = ["sh", "-c", {json.dumps(a_does + "; touch out.txt")}]\n'
        f'gate = ["sh", "{tmp / "check.sh"}"]\nspend_ceiling = 5.0\n{gate_files}'
        f'[node.b]\nneeds = ["a"]\nworker = ["sh", "-c", "touch out.txt"]\n'
        f'gate = ["sh", "{tmp / "check.sh"}"]\nspend_ceiling = 5.0\n{gate_files}')
    ledger = tmp / "run.jsonl"
    try:
        runner = Runner.start(load_spec(spec), ledger)
    except BadInput as exc:
        return None, [], str(exc)
    try:
        code = runner.run()
    finally:
        runner.close()
    return code, list(Ledger.open(ledger).records), ""


def _attempted(records: list[dict]) -> list[str]:
    return [r["node"] for r in records if r.get("type") == "begin"]


@case("CF046", "policy field changed mid-run",
      obligation="G6: the policy is checked before every stage; a change stops the run",
      fault="node a's worker raises the policy's spend budget (budget.spend) in the pinned "
            "policy file; no gate file changes",
      expected="exit 5 naming budget.spend; a pin_changed record for the policy; node b never "
               "begins")
def cf046(tmp: Path) -> None:
    code, records, _ = _run(tmp, a_does=f"sed -i 's/spend = 60.0/spend = 61.0/' "
                                        f"{tmp / 'policy.toml'}")
    assert code == 5, code
    changed = [r for r in records if r.get("type") == "pin_changed"]
    assert changed and "budget.spend" in json.dumps(changed[-1]), changed
    assert _attempted(records) == ["a"], _attempted(records)


@case("CF047", "policy inside a worker's folder",
      obligation="G6: no worker can write the policy: it must lie outside every workspace",
      fault="the graph names a policy file inside the run's worker folder (<ledger>.work/)",
      expected="the run is refused before it starts (bad input naming the folder); no ledger")
def cf047(tmp: Path) -> None:
    code, records, refused = _run(tmp, policy_at=tmp / "run.jsonl.work" / "policy.toml")
    assert code is None and "inside the worker's folder" in refused, (code, refused)
    assert not (tmp / "run.jsonl").exists()


@case("CF048", "graph budget beyond the policy's",
      obligation="G6: the policy bounds the graph: a graph asking for more spend is refused",
      fault="the graph asks for a larger spend budget than the policy allows",
      expected="the run is refused before it starts, naming the spend budget; no ledger")
def cf048(tmp: Path) -> None:
    code, _, refused = _run(tmp, budget=100.0)
    assert code is None and "spend" in refused, (code, refused)
    assert not (tmp / "run.jsonl").exists()


@case("CF049", "a file a gate depends on changed mid-run",
      obligation="a gate's verdict means something only against the files pinned at start",
      fault="node a's worker rewrites dep.txt, a gate file of both nodes that the policy does "
            "not name",
      expected="exit 5; a pin_changed record naming dep.txt; node b never begins")
def cf049(tmp: Path) -> None:
    code, records, _ = _run(tmp, a_does=f"echo v2 > {tmp / 'dep.txt'}", gate_pin=True)
    assert code == 5, code
    changed = [r for r in records if r.get("type") == "pin_changed"]
    assert changed and changed[-1].get("file", "").endswith("dep.txt"), changed
    assert _attempted(records) == ["a"], _attempted(records)


@case("CF050", "release without the approval the policy requires",
      obligation="G6: the pinned policy's release conditions decide whether a run may end DONE",
      fault="every node passes, the policy requires approval by alice, nobody approves",
      expected="exit 3; a release_unmet record naming approved; no finish record")
def cf050(tmp: Path) -> None:
    code, records, _ = _run(tmp, conditions=("all_done", "approved"), extra='approver = "alice"')
    assert code == 3, code
    assert records[-1]["type"] == "release_unmet" and records[-1]["unmet"] == ["approved"]
    assert "finish" not in [r["type"] for r in records]
