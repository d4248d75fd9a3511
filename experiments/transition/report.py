"""The figures block of docs/transition.md, written from result files: the paper's figures next
to the search coder's (results/transition) and the local model's (results/transition-llm).

Why generated: numbers in the docs come from runs, never typed by hand. The block between the two
markers is replaced; the prose around it (what differs and why) is written by people and refers
to the rows by name.

    python -m experiments.transition.report [--results results] [--write docs/transition.md]

Without --write the block is printed; --write refuses (exit 2, the page untouched) a results
folder without the search coder's summary. `python -m paper` writes the block from
reference-results/. The paper's figures are quoted from seed paper 003 ("Looping
Is Not Reliability"); where the paper's quantity has no counterpart here the cell says so.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.transition import chat
from experiments.transition.reply_edits import Refused

BEGIN = "<!-- figures:begin (python -m experiments.transition.report --write) -->"
END = "<!-- figures:end -->"

# The paper's figures (seed paper 003). Strings, so they print exactly as the paper gives them.
PAPER = {
    "scale": "30 tasks x 6 conditions x 5 seeds, T = 3 (900 trajectories)",
    "current": "0.820, 0.673, 0.693", "ever": "0.820, 0.847, 0.853",
    "current_binary": "0.700, 0.700, 0.720", "stale_trace": "0.687, 0.713, 0.660",
    "unavailable": "0.687, 0.687, 0.707",
    "lost_pooled": "0.160", "lost_current": "not given",
    "harm": "34/135 vs 4/135 (14B)",
    "intercepts": "all 12 (7B), all 34 (14B)", "harm_diff": "+0.222 [0.089, 0.370], Holm p 0.0337",
    "g_harm": "0/135 vs 13/135", "g_repair": "93/135 vs 100/135",
    "g_unsafe": "0/270 vs 1/270", "g_sound": "211/270 vs 219/270",
    "criterion": "fails", "criterion_bca": "not given", "self_only": "0.998 / 0.295 / 0.703",
    "visible_gate": "0.797 / 0.024 / 0.778", "challenge_gate": "0.778 / 0.000 / 0.778",
    "risk70": "LLM judges: 0.050 (Qwen-7B), 0.041 (14B), 0.240 (DeepSeek-6.7B)",
    "risk70_unique": "0.400, 0.387, 0.472 (617 unique of 2,700)",
    "dependence": "7B~14B: phi 0.641, D 0.060 [0.001, 0.133]",
    "risk70_held_out": "not given (in-sample thresholds)",
    "fresh": "coverage 0.384, 311 sound completions lost, 2.27 revisions",
    "validity": "5 DONE-only replies (7B, HumanEval/137) mapped to Keep",
}


COMPETENCE = ("0.5b", "1.5b")  # the local models whose competence check the block reports


def _f(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _seq(xs: Any) -> str:
    return ", ".join(_f(x) for x in xs) if xs else "n/a"


def _ci(c: Any) -> str:
    """An interval, or "no variation" where every task gave the same value (stats.interval)."""
    return "(no variation)" if not c or c[0] is None else f"[{c[0]:.3f}, {c[1]:.3f}]"


def _pair(d: dict[str, Any], key: str) -> str:
    g, b = d[key]["guarded"], d[key]["baseline"]
    return (f"{g[0]}/{g[1]} vs {b[0]}/{b[1]}; {d[key]['difference']:+.3f} "
            f"{_ci(d[key]['ci95'])}")


def _stop(s: dict[str, Any], rule: str) -> str:
    r = s["stopping_replay"][rule]
    return f"{_f(r['coverage'])} / {_f(r['risk'])} / {_f(r['sound_completion'])}"


def _validity(s: dict[str, Any]) -> str:
    v = s["validity"]["trajectories"]
    worst = min(v.items(), key=lambda kv: kv[1]["valid_share"] or 0.0)
    allv = s["validity"]["all"]
    why = ", ".join(f"{k} {n}" for k, n in allv["invalid"].items()) or "none invalid"
    patches = sum(x["actions"].get("patch", 0) for x in v.values())
    broken = sum(sum(x["patches_not_loading"].values()) for x in v.values())
    return (f"{_f(allv['valid_share'])} valid of {allv['replies']} ({why}); lowest: "
            f"{worst[0]} {_f(worst[1]['valid_share'])}; trajectory patches that do not load: "
            f"{broken} of {patches}")


def _risk(s: dict[str, Any], level: str) -> str:
    m = s["verifiers_matched"][level]
    vs = m["verifiers"]
    return (f"self {_f(vs['self']['risk'])}, visible {_f(vs['visible']['risk'])}, "
            f"challenge {_f(vs['challenge']['risk'])} ({m['candidates']} candidates)")


def _dep(s: dict[str, Any]) -> str:
    m = s["verifiers_matched"]["revisions"]
    if m.get("dependence_undefined"):
        return f"not defined: {m['dependence_undefined']}"
    d = m["dependence"]["visible~challenge"]
    return f"visible~challenge: phi {_f(d['phi'])}, D {_f(d['D'])} {_ci(d['D_ci95'])}"


def _held_out(s: dict[str, Any]) -> str:
    h = s["verifiers_matched"]["revisions"].get("held_out")
    if not h:
        return "n/a (fewer than two tasks)"
    at = {v: next(p for p in pts if p["target"] == 0.7) for v, pts in h["risk_coverage"].items()}
    return ", ".join(f"{v} {_f(p['risk'])} at coverage {_f(p['coverage'])}"
                     for v, p in at.items())


def _fresh(s: dict[str, Any]) -> str:
    r = s["freshness_cost"]["stopping_replay"]
    return (f"coverage {_f(r['fresh_gate_coverage'])}, {r['sound_lost_vs_self_only']} sound "
            f"completions lost, {_f(r['mean_revisions_to_stop'], 2)} revisions")


ROWS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    ("size", "scale", lambda s: f"{len(s['tasks'])} tasks x {len(s['conditions'])} conditions x "
                                f"{len(s['seeds'])} seeds, T = {s['T']} ({s['trajectories']} "
                                "trajectories)"),
    ("current correct by revision (current trace)", "current",
     lambda s: _seq(s["current_correct"])),
    ("ever-correct by revision (current trace)", "ever", lambda s: _seq(s["ever_correct"])),
    ("current correct, current binary", "current_binary",
     lambda s: _seq(s["by_condition"]["current_binary"]["current_correct"])),
    ("current correct, stale trace", "stale_trace",
     lambda s: _seq(s["by_condition"]["stale_trace"]["current_correct"])),
    ("current correct, unavailable", "unavailable",
     lambda s: _seq(s["by_condition"]["unavailable"]["current_correct"])),
    ("lost after found, all conditions", "lost_pooled",
     lambda s: _f(s["lost_after_found_pooled"])),
    ("lost after found, current trace", "lost_current", lambda s: _f(s["lost_after_found"])),
    ("stale vs current harm (common state)", "harm",
     lambda s: f"{s['stale_vs_current_harm']['stale'][0]}/{s['stale_vs_current_harm']['stale'][1]}"
               f" vs {s['stale_vs_current_harm']['current'][0]}/"
               f"{s['stale_vs_current_harm']['current'][1]}"),
    ("replay: stale-condition harms intercepted", "intercepts",
     lambda s: f"{s['replay_intercepts']['stale_trace']['intercepted']} of "
               f"{s['replay_intercepts']['stale_trace']['harms']} (by the gate alone: "
               f"{s['replay_intercepts']['stale_trace']['by_gate']})"),
    ("difference, 95% CI, Holm p", "harm_diff",
     lambda s: f"{s['stale_vs_current_harm']['difference']:+.3f} "
               f"{_ci(s['stale_vs_current_harm']['ci95'])}, Holm p "
               f"{s['stale_vs_current_harm']['p_holm']}"),
    ("guarded vs baseline: harm from correct starts", "g_harm",
     lambda s: _pair(s["guarded_vs_baseline"], "harm_from_correct_starts")),
    ("guarded vs baseline: repair from wrong starts", "g_repair",
     lambda s: _pair(s["guarded_vs_baseline"], "repair_from_wrong_starts")),
    ("guarded vs baseline: unsafe completion", "g_unsafe",
     lambda s: _pair(s["guarded_vs_baseline"], "unsafe_completion")),
    ("guarded vs baseline: sound completion", "g_sound",
     lambda s: _pair(s["guarded_vs_baseline"], "sound_completion")),
    ("pre-specified joint criterion", "criterion",
     lambda s: "passes" if s["pre_specified"]["passes"] else "fails (" + ", ".join(
         k for k, v in s["pre_specified"]["parts"].items() if not v["passes"]) + ")"),
    ("the same criterion on BCa intervals (sensitivity only)", "criterion_bca",
     lambda s: "passes" if s["pre_specified_on_bca"]["passes"] else "fails (" + ", ".join(
         k for k, v in s["pre_specified_on_bca"]["parts"].items() if not v["passes"]) + ")"),
    ("stopping replay, self-only: coverage / risk / sound", "self_only",
     lambda s: _stop(s, "self_only")),
    ("stopping replay, visible gate", "visible_gate", lambda s: _stop(s, "visible_gate")),
    ("stopping replay, challenge gate", "challenge_gate", lambda s: _stop(s, "challenge_gate")),
    ("selective risk at 70% coverage, revisions", "risk70",
     lambda s: _risk(s, "revisions")),
    ("the same, unique (task, code hash)", "risk70_unique",
     lambda s: _risk(s, "unique_task_code")),
    ("held-out thresholds: risk at 70% target coverage", "risk70_held_out", _held_out),
    ("dependence among incorrect candidates", "dependence", _dep),
    ("strict freshness (stopping replay)", "fresh", _fresh),
    ("reply validity", "validity", _validity),
]


def _code_only(source: str) -> str | None:
    """The module without its docstrings, normalized (None if it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def patch_effects(replies_file: Path) -> dict[str, Any] | None:
    """What each distinct reply that is a patch did to the file it was shown: returned it
    unchanged, changed only docstrings, or changed code (by the normalized module, docstrings
    taken out); `refused` counts the edits the typed boundary refused (reply_edits.Refused).
    Why: a model that rewrites the file can leave the code as it found it, and then no rate of
    the experiment can move; this says whether it did. `share_code` is code / replies, over
    every distinct reply (a Keep, an Escalate and a refused edit change no code)."""
    try:
        lines = replies_file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    out: dict[str, Any] = {"replies": 0, "patches": 0, "unchanged": 0, "docstrings_only": 0,
                           "code": 0, "refused": 0}
    for line in lines:
        try:
            e = json.loads(line)
            shown = chat.shown_file(e["request"]["messages"])
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        out["replies"] += 1
        try:
            reply = json.loads(chat.as_reply_json(e.get("content"), shown) or "null")
        except Refused:
            out["refused"] += 1
            continue
        except (ValueError, TypeError):
            continue
        new = reply["files"].get(chat.SOLUTION) if isinstance(reply, dict) and reply.get(
            "action") == "patch" and isinstance(reply.get("files"), dict) else None
        if shown is None or not isinstance(new, str):
            continue
        before, after = _code_only(shown), _code_only(new)
        if before is None or after is None:
            continue
        out["patches"] += 1
        if ast.unparse(ast.parse(shown)) == ast.unparse(ast.parse(new)):
            out["unchanged"] += 1
        elif before == after:
            out["docstrings_only"] += 1
        else:
            out["code"] += 1
    out["share_code"] = round(out["code"] / out["replies"], 4) if out["replies"] else None
    return out


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _cell(fn: Callable[[dict[str, Any]], str], s: dict[str, Any] | None) -> str:
    if s is None:
        return "not run"
    try:
        return fn(s)
    except (KeyError, TypeError, IndexError):
        return "n/a"


def block(results: Path) -> str:
    """The markdown between the markers: one table, a row per figure."""
    search = _load(results / "transition" / "summary.json")
    # the search coder at paper scale, when that run is kept (its own folder: make reproduce
    # refreshes transition/ at default scale and leaves this one as it is)
    at_paper = _load(results / "transition-paper" / "summary.json")
    model = _load(results / "transition-llm" / "summary.json")
    manifest = _load(results / "transition-llm" / "manifest.json")
    head = "model" if model is None else f"{model.get('model', 'model')}"

    def source(s: dict[str, Any] | None, name: str) -> str:
        return (f"- {name}: not run" if s is None else
                f"- {name}: scale `{s['scale']}`, seed {s['seed']}, coder `{s['coder']}`")

    lines = [BEGIN, "",
             source(search, "search coder (`results/transition`)"),
             *([source(at_paper, "search coder at paper scale (`results/transition-paper`)")]
               if at_paper else []),
             source(model, "model (`results/transition-llm`)")]
    if manifest:
        resumed = manifest.get("resumed_replies") or 0
        cpu = manifest.get("model_cpu_seconds") or {}
        lines.append(f"- model run: {manifest.get('requests')} requests "
                     f"({manifest.get('unique_requests')} distinct), "
                     f"{manifest['tokens']['total']:,} tokens; "
                     + (f"{resumed} replies resumed from an interrupted run of the same "
                        "requests, then " if resumed else "")
                     + f"{manifest.get('model_calls')} model calls taking "
                     + (f"{cpu['generation']} s of model-server CPU and " if "generation" in cpu
                        else "")
                     + f"{manifest.get('wall_seconds')} s wall clock, "
                     f"{manifest['runtime'].get('threads')} thread(s), load average "
                     f"{manifest.get('load_average')} at the end")
    for key in COMPETENCE:
        c = _load(results / f"competence-{key}" / "summary.json")
        if c and c.get("pass_at_1_ci95"):
            lo, hi = c["pass_at_1_ci95"]
            lines.append(f"- competence check, {c['model']} (`results/competence-{key}`): pass@1 "
                         f"from scratch {c['passed']} of {c['tasks']} tasks = "
                         f"{_f(c['pass_at_1'])} [{_f(lo)}, {_f(hi)}] ({c['interval_method']} "
                         f"95%), {c['valid_replies']} valid replies, scale `{c['scale']}`")
    effects = patch_effects(results / "transition-llm" / "replies.jsonl") if model else None
    if effects:
        lines.append(f"- the model's distinct replies (`replies.jsonl`): {effects['replies']}, "
                     f"of which {effects['refused']} edits refused by the typed boundary and "
                     f"{effects['patches']} patches; {effects['unchanged']} return the file "
                     f"unchanged, {effects['docstrings_only']} change only docstrings, "
                     f"{effects['code']} change code (share of replies changing code "
                     f"{_f(effects['share_code'])})")
    extra = " search coder, paper scale |" if at_paper else ""
    lines += ["", f"| figure | paper | search coder |{extra} {head} |",
              "|---|---|---|" + ("---|" if at_paper else "") + "---|"]
    for label, key, fn in ROWS:
        paper_cell = f" {_cell(fn, at_paper)} |" if at_paper else ""
        lines.append(f"| {label} | {PAPER[key]} | {_cell(fn, search)} |{paper_cell} "
                     f"{_cell(fn, model)} |")
    lines += ["", END]
    return "\n".join(lines)


def replace(doc: str, new_block: str) -> str:
    """`doc` with its figures block replaced (ValueError when the markers are missing)."""
    i, j = doc.find(BEGIN), doc.find(END)
    if i < 0 or j < i:
        raise ValueError("the figures markers are missing")
    return doc[:i] + new_block + doc[j + len(END):]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.transition.report",
                                description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--write", type=Path, help="replace the figures block of this markdown file")
    p.add_argument("--effects", action="store_true",
                   help="print the competence checks and what the model's distinct replies "
                   "did to the code")
    args = p.parse_args(argv)
    if args.effects:
        for key in COMPETENCE:  # the competence checks first, then what the replies did
            c = _load(args.results / f"competence-{key}" / "summary.json")
            if c and c.get("pass_at_1_ci95"):
                lo, hi = c["pass_at_1_ci95"]
                print(f"competence {c['model']}: pass@1 {c['passed']}/{c['tasks']} = "
                      f"{_f(c['pass_at_1'])} [{_f(lo)}, {_f(hi)}] exact 95%, from scratch")
        e = patch_effects(args.results / "transition-llm" / "replies.jsonl")
        if not e:
            print(f"experiments.transition.report: {args.results}/transition-llm/replies.jsonl: "
                  "no stored model replies; fix: run make reproduce-llm", file=sys.stderr)
            return 2
        print(f"model replies: {e['replies']} distinct, {e['code']} change code (share "
              f"{_f(e['share_code'])}); of {e['patches']} patches {e['docstrings_only']} change "
              f"only docstrings, {e['unchanged']} return the file unchanged; {e['refused']} "
              "edits refused")
        return 0
    if args.write is not None and not (args.results / "transition" / "summary.json").is_file():
        # the page is tracked: never replace its figures with "not run"
        print(f"experiments.transition.report: {args.results}/transition/summary.json is "
              f"missing: {args.write} left as it is; fix: run make reproduce, or write the page "
              "from the committed copy (python -m paper)", file=sys.stderr)
        return 2
    text = block(args.results)
    if args.write is None:
        print(text)
        return 0
    try:
        doc = args.write.read_text(encoding="utf-8")
        args.write.write_text(replace(doc, text), encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"experiments.transition.report: {args.write}: {exc}; fix: keep the lines "
              f"{BEGIN!r} and {END!r} in the file", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
