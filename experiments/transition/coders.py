"""Coders behind one protocol: given a task, the current code and one piece of evidence, reply
with a typed action (engine.admission.actions Keep | Patch | Escalate) and a self-report.

Two adapters:

- `SearchCoder`, offline and deterministic: it reads the evidence it is handed (fresh or stale, it
  cannot tell), tries edits from `experiments.transition.edits` in a seeded order, and proposes the first one
  that makes the checks named in the evidence pass. It overfits by design: it checks only what the
  evidence names. Its exact behaviour per kind of evidence is in docs/transition.md.
- `OpenAICoder`, for any OpenAI-compatible `/chat/completions` server: each call is metered, with a
  reservation made before the request is sent; the prompt and the reply forms are
  `experiments.transition.chat`'s, and the reply is parsed fail-closed by
  `engine.admission.actions.parse_reply`, so anything but a well-formed patch of `solution.py` is Keep.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from experiments.transition import chat
from experiments.transition.edits import enumerate_edits, normalize, restorations
from experiments.transition.reply_edits import Refused
from experiments.transition.tasks import Case, Task, code_hash, run_cases
from loopproof.engine.admission.actions import Action, Escalate, Keep, Patch, parse_reply
from loopproof.engine.admission.evidence import Evidence

SOLUTION = chat.SOLUTION
SEARCH_BUDGET = 60  # edits the search coder tries per revision


@dataclass(frozen=True)
class Request:
    task: Task
    source: str
    evidence: Evidence | None
    history: tuple[str, ...] = ()  # earlier states of this trajectory, oldest first
    seed: int = 0
    revision: int = 1


# Why a reply was mapped to Keep; reported per condition (the paper's HumanEval/137 case was
# "done_only": a reply saying STATUS: DONE with no code).
INVALID_CLASSES = ("done_only", "not_an_action", "malformed_action", "wrong_file", "syntax_error",
                   "call_failed", "not_applicable", "odd_bytes")


def invalid_class(problem: str) -> str:
    """The class of a parse problem reported by engine.admission.actions.parse_reply."""
    if "DONE-only" in problem:
        return "done_only"
    if problem in ("not a JSON object", "empty reply", "missing, oversized or not UTF-8"):
        return "not_an_action"
    return "malformed_action"


@dataclass(frozen=True)
class Reply:
    action: Action
    claims_done: bool         # the coder's self-report: "this is correct now"
    mode: str                 # how the coder read its evidence: repair | preserve | blind | llm
    tried: int = 0            # edits (or calls) spent on this reply
    note: str = ""
    valid: bool = True        # False when a reply was malformed and mapped to Keep
    why: str = ""             # for an invalid reply, its class (INVALID_CLASSES); else ""


class Coder(Protocol):
    name: str

    def revise(self, request: Request) -> Reply: ...


def patched_source(action: Action) -> str | None:
    """The new source when `action` is a Patch of solution.py, else None."""
    if isinstance(action, Patch):
        text = action.files.get(SOLUTION)
        if isinstance(text, str):
            return text
    return None


def _cases(items: Any) -> list[Case]:
    out = []
    for item in items or ():
        if isinstance(item, dict) and isinstance(item.get("args"), str) \
                and isinstance(item.get("expected"), str):
            out.append(Case(item["args"], item["expected"]))
    return out


@lru_cache(maxsize=8192)
def _search(entry: str, sources: tuple[str, ...], checks: tuple[Case, ...]
            ) -> list[list[tuple[bool, str, float]]]:
    """The search's test runs, cached: conditions that name the same checks on the same state
    ask the same question (results are deterministic, so the cache changes no outcome)."""
    return run_cases(entry, list(sources), list(checks), first=True)


class SearchCoder:
    """Search-based repair over the edit family; seeded, deterministic, offline."""

    name = "search"

    def __init__(self, budget: int = SEARCH_BUDGET) -> None:
        self.budget = budget

    def read(self, evidence: Evidence | None) -> tuple[str, list[Case]]:
        """What the evidence asks of the next state: ("repair", [the failing case]),
        ("preserve", [every case listed as passing]) or ("blind", [])."""
        payload = evidence.payload if evidence is not None else {}
        failed, passed = _cases(payload.get("failed")), _cases(payload.get("passed"))
        if failed:
            return "repair", failed[:1]
        if passed and payload.get("verdict") == "pass":
            return "preserve", passed
        return "blind", []

    def revise(self, request: Request) -> Reply:
        task, source = request.task, request.source
        mode, checks = self.read(request.evidence)
        edits = enumerate_edits(source, task.entry) + restorations(source, list(request.history))
        rng = random.Random(f"search|{request.seed}|{task.task_id}|{request.revision}|"
                            f"{code_hash(source)}")
        rng.shuffle(edits)
        edits = edits[:self.budget]
        if not edits:
            return Reply(Escalate("no edit of the family applies"), False, mode)
        if mode == "blind":
            e = edits[0]
            return Reply(Patch({SOLUTION: e.source}), True, mode, 1, f"{e.kind} {e.where}")
        rows = _search(task.entry, tuple(e.source for e in edits), tuple(checks))
        for e, row in zip(edits, rows, strict=False):
            if all(ok for ok, _, _ in row):
                return Reply(Patch({SOLUTION: e.source}), True, mode, len(rows),
                             f"{e.kind} {e.where}")
        return Reply(Escalate(f"none of {len(edits)} edits makes the named checks pass"),
                     False, mode, len(rows))


# --------------------------------------------------------------------------- OpenAI-compatible
class SpendMeter(Protocol):
    """What the coder needs from a meter: engine.run.meter.Meter has exactly this shape."""

    def reserve(self, amount: float, what: str = ...) -> float: ...

    def settle(self, used: float, what: str = ..., **facts: Any) -> float: ...


@dataclass
class OpenAICoder:
    """A chat model behind an OpenAI-compatible server. Price is per 1,000 tokens (prompt and
    completion alike); the reservation assumes the prompt's characters/3 plus `max_tokens`."""

    base_url: str
    model: str
    meter: SpendMeter
    price_per_1k: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 60.0
    api_key: str | None = None
    name: str = field(default="openai", init=False)

    def messages(self, request: Request) -> list[dict[str, str]]:
        return chat.messages(request.task.prompt, request.source, request.evidence,
                             request.task.entry)

    def revise(self, request: Request) -> Reply:
        messages = self.messages(request)
        # an upper bound, not an estimate: a byte-level BPE token is at least one UTF-8 byte, so
        # the prompt has at most `size` tokens; a claim above the hold fails the attempt
        size = sum(len(m["content"].encode("utf-8")) for m in messages)
        reserved = self.meter.reserve((size + self.max_tokens) / 1000 * self.price_per_1k,
                                      "chat call")
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0,
                           "seed": request.seed, "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, body, headers),
                                        timeout=self.timeout_s) as resp:
                data = json.loads(resp.read().decode("utf-8"))
            content = data["choices"][0]["message"]["content"]
            usage = data.get("usage") or {}
            tokens = usage.get("total_tokens")
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            self.meter.settle(reserved, "chat call", error=type(exc).__name__)
            return Reply(Keep(f"call failed: {type(exc).__name__}"), False, "llm", 1,
                         valid=False, why="call_failed")
        used = reserved if not isinstance(tokens, int) else tokens / 1000 * self.price_per_1k
        self.meter.settle(used, "chat call", tokens=tokens)
        return self.parse(content, request.source, request.task.entry)

    @staticmethod
    def parse(content: Any, current: str | None = None, entry: str | None = None) -> Reply:
        """Fail closed: a reply that is not one well-formed action, an edit that cannot be
        applied to `current` (the file the model was shown), a patch of anything but
        solution.py, or code that does not parse, is Keep, with its class and reason."""
        try:
            text = chat.as_reply_json(content if isinstance(content, str) else None, current,
                                      entry)
        except Refused as exc:
            return Reply(Keep(f"invalid reply: {exc.reason}"), False, "llm", 1, "", False,
                         exc.why)
        parsed = parse_reply(text)
        note = parsed.note or ""
        action = parsed.action
        valid = parsed.valid
        why = "" if valid else invalid_class(parsed.problem or "")
        if isinstance(action, Patch):
            src = action.files.get(SOLUTION)
            if set(action.files) != {SOLUTION} or not isinstance(src, str):
                action, valid = Keep("invalid reply: a patch may only write solution.py"), False
                why = "wrong_file"
            else:
                try:
                    action = Patch({SOLUTION: normalize(src)})
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    action, valid = Keep("invalid reply: the patch does not parse"), False
                    why = "syntax_error"
        claims = valid and not isinstance(action, Escalate) and "done" in note.lower()
        return Reply(action, claims, "llm", 1, note, valid, why)


def model_meter(budget: float, node: str = "coder") -> tuple[Any, list[dict[str, Any]]]:
    """An engine meter for running the chat coder outside a graph run: one node whose attempt
    ceiling and run budget are both `budget`, its state moved only by `model.step`. Returns the
    meter and the list its records are appended to (in place of a ledger)."""
    from loopproof.engine.run.meter import Meter
    from loopproof.model import Begin, LoopGraph, NodeSpec, initial_state, step

    graph = LoopGraph.build([NodeSpec(node, attempts=1, spend_ceiling=float(budget))],
                            spend_budget=float(budget))
    box = {"state": step(graph, initial_state(graph), Begin(node))}
    records: list[dict[str, Any]] = []

    def commit(event: Any, record: dict[str, Any]) -> Any:
        box["state"] = step(graph, box["state"], event)
        records.append({**record, **vars(event), "event": type(event).__name__})
        return box["state"]

    return Meter(graph, node, commit, lambda: box["state"]), records
