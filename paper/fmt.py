"""How a result value is printed: one function per format, shared by the paper and the docs.

Why here and only here: the test that a macro equals what results/ says applies these same
functions to the value it reads itself, so a format is defined once.
"""

from __future__ import annotations

import math
from typing import Any

# The formats a key can be asked for: \R{key} is "auto"; \Rf{2}{key} is "f2"; \Rp{key} is "pct"
# (one decimal), \Rpz{key} "pct0", \Rsci{key} "sci".
FLOAT_FORMATS = ("f0", "f1", "f2", "f3", "f4", "pct", "pct0", "sci")


def _group(n: int) -> str:
    return f"{n:,}"


def auto(value: Any) -> str:
    """Integers with thousands separators, floats to 3 decimals (scientific below 1e-3 unless 0),
    booleans as yes/no, strings as they are."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return _group(value)
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) < 1e-3:
            return sci(value)
        if value == int(value) and abs(value) < 1e15:
            return _group(int(value))
        return f"{value:,.3f}"
    if value is None:
        return "n/a"
    return str(value)


def sci(value: float) -> str:
    """1.42e-14 as `1.42 x 10^-14` in the plain form the docs use; LaTeX gets its own form."""
    if value == 0:
        return "0"
    exp = math.floor(math.log10(abs(value)))
    return f"{value / 10 ** exp:.2f}e{exp}"


def fixed(value: Any, digits: int) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return auto(value)
    return f"{value:,.{digits}f}"


def pct(value: Any, digits: int = 1) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return auto(value)
    return f"{100 * value:.{digits}f}%"


def apply(value: Any, form: str = "auto") -> str:
    """`value` in format `form` (one of "auto" and FLOAT_FORMATS) as plain text."""
    if form == "auto":
        return auto(value)
    if form == "sci":
        return sci(value) if isinstance(value, int | float) and not isinstance(value, bool) \
            else auto(value)
    if form.startswith("pct"):
        return pct(value, 0 if form == "pct0" else 1)
    if form.startswith("f") and form[1:].isdigit():
        return fixed(value, int(form[1:]))
    raise ValueError(f"unknown format {form!r}")


def latex_text(s: str) -> str:
    """Plain text (a formatted value or a string from results/) made safe for LaTeX text mode."""
    out = []
    for ch in s:
        if ch in "&%$#_{}":
            out.append("\\" + ch)
        elif ch == "~":
            out.append(r"\textasciitilde{}")
        elif ch == "^":
            out.append(r"\textasciicircum{}")
        elif ch == "\\":
            out.append(r"\textbackslash{}")
        elif ch == "<":
            out.append(r"\textless{}")
        elif ch == ">":
            out.append(r"\textgreater{}")
        else:
            out.append(ch)
    return "".join(out)


def latex_value(value: Any, form: str = "auto") -> str:
    """A value for LaTeX: scientific notation as a power of ten, minus signs as en-rules."""
    text = apply(value, form)
    if "e" in text and (text[0].isdigit() or text.startswith("-")):
        mant, _, exp = text.partition("e")
        if exp.lstrip("-").isdigit():
            return f"\\ensuremath{{{mant}\\times 10^{{{exp}}}}}"
    if text.startswith("-") and text[1:2].isdigit():
        return "\\textminus{}" + latex_text(text[1:])
    return latex_text(text)
