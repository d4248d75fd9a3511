"""One figure beside its target: the value, the target, their ratio and the words "met"/"missed".

Why a module of its own: every benchmark module reports through it, so `python -m bench` prints
each figure the same way and bench.json holds the same fields for each.
"""

from __future__ import annotations

from typing import Literal

Better = Literal["lower", "higher"]


def figure(value: float, target: float, unit: str, better: Better = "lower",
           **extra: object) -> dict[str, object]:
    """`ratio` is value / target: met when <= 1 for a ceiling (`lower`), >= 1 for a floor. Both
    come from the value as printed (4 places), so the printed ratio is the printed quotient."""
    value = round(value, 4)
    ratio = value / target if target else float("inf")
    met = ratio <= 1 if better == "lower" else ratio >= 1
    return {"value": value, "target": target, "unit": unit, "better": better,
            "ratio_to_target": round(ratio, 3), "verdict": "met" if met else "missed", **extra}


def line(name: str, f: dict[str, object]) -> str:
    """`name: value unit (target <= T unit, ratio r) met`."""
    sign = "<=" if f["better"] == "lower" else ">="
    return (f"{name}: {f['value']:g} {f['unit']} (target {sign} {f['target']:g} {f['unit']}, "
            f"ratio {f['ratio_to_target']:g}) {f['verdict']}")


def figures(result: dict[str, object], prefix: str = "") -> list[tuple[str, dict[str, object]]]:
    """Every figure in a benchmark's (nested) result dict, with its dotted name."""
    out: list[tuple[str, dict[str, object]]] = []
    for key, value in result.items():
        if isinstance(value, dict) and "verdict" in value and "target" in value:
            out.append((prefix + key, value))
        elif isinstance(value, dict):
            out += figures(value, f"{prefix}{key}.")
    return out
