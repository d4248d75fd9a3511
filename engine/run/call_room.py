"""Is there room for a model call? A loaded spec's `llm` nodes, checked against the price and
the engine's environment before a run starts or resumes (and by `bound`).

Why a module of its own: these checks need the whole loaded spec (a node's ceiling, its
eval_reserve, its timeout, the run's price: `resume --price P` asks again at the new price) and,
for the key, the environment of the command that calls the model; spec loading checks tables,
one field at a time (engine/run/spec_checks.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopproof.engine.run.proxy import pricing
from loopproof.engine.system.errors import BadInput


def upstream_keys(nodes: Mapping[str, Any], file: str) -> None:
    """BadInput (exit 2) for the first node whose `llm.api_key_env` is not set in the engine's
    environment: asked by `run` and `resume`, the commands that call the model."""
    for name, cfg in nodes.items():
        llm = getattr(cfg, "llm", None)
        if llm is not None and llm.api_key_env is not None and llm.key() is None:
            raise BadInput(file, f"node {name!r}, field 'llm.api_key_env'",
                           f"{llm.api_key_env} is not set in the engine's environment",
                           f"export {llm.api_key_env}=<the upstream key> before "
                           "`loopproof run` / `resume`")


def model_room(nodes: Mapping[str, Any], ceilings: Mapping[str, float], price: float,
               file: str) -> None:
    """BadInput (exit 2) for the first node with an `llm` table whose wall-clock reservation
    leaves less than one call's bound for its model calls. A command worker reserves
    min(timeout_s x price, c_v - eval_reserve) for its wall clock before it starts; its calls
    are paid from the rest, and the least a call can be bound to is its completion cap
    (max_tokens at the completion price, before a single prompt token). Less than that left
    and every call is answered 402 from the first: the run "works" and the agent never gets a
    reply."""
    for name, cfg in nodes.items():
        llm = getattr(cfg, "llm", None)
        if llm is None:
            continue
        worker_c = ceilings[name] - cfg.eval_reserve
        wall = min(cfg.timeout_s * price, worker_c)
        left = round(worker_c - wall, 6)
        call = pricing.cost(llm, 0, llm.max_tokens)
        if left + 1e-9 < call:
            raise BadInput(
                file, f"node {name!r}, field 'timeout_s'",
                f"the wall-clock reservation timeout_s x price = {cfg.timeout_s:g} x "
                f"{price:g} = {cfg.timeout_s * price:g} leaves {left:g} of c_v - eval_reserve "
                f"= {worker_c:g} for model calls, less than one call's bound {call:g} "
                f"(max_tokens {llm.max_tokens} at price_completion_per_1k "
                f"{llm.price_completion_per_1k:g}, before any prompt token)",
                _room_fix(worker_c, call, cfg.timeout_s))


def _room_fix(worker_c: float, call: float, timeout_s: float) -> str:
    """The fix: a price whose wall clock leaves room for ten calls (or one), else a c_v."""
    for calls in (10, 1):
        room = worker_c - calls * call
        if room > 0:
            return (f"lower timeout_s or the price (e.g. [graph] price = "
                    f"{room / timeout_s / 2:.3g} leaves room for {calls} call(s)), or raise "
                    "spend_ceiling")
    return (f"raise spend_ceiling above {call:g} + the wall clock's share, or lower "
            "max_tokens or the prices")


def refuse_unfit_model_calls(spec: Any, price: float | None = None) -> None:
    """`model_room` for a loaded spec (engine.run.spec.Spec) at `price` (default: the spec's):
    asked by `bound`, `run` and `resume`."""
    model_room(spec.nodes, {n.name: n.spend_ceiling for n in spec.graph.nodes},
               spec.price if price is None else price, str(spec.path))


def refuse_missing_keys(spec: Any) -> None:
    """`upstream_keys` for a loaded spec: asked only where the model is called (`run`,
    `resume`)."""
    upstream_keys(spec.nodes, str(spec.path))
