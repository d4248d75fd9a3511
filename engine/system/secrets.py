"""Keep the engine's secrets out of everything it records.

Why, with a sandbox already: the sandbox keeps the engine's environment out of a worker's reach
(only allow-listed variables pass, engine/system/process.py), but `sandbox = "none"` gives that
up, and a gate or a check may print what it was given. So every record the run appends, and
every output tail an admission check keeps, passes through `redact`: each value of an engine
environment variable whose name says it holds a secret (KEY, TOKEN, SECRET, PASSWORD, ...,
and every LOOPPROOF_* variable) is replaced by `[redacted NAME]`. Values shorter than
`MIN_LEN` are left alone (they would match ordinary words). Digests of the raw output are kept
as they are (they reveal nothing).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|"
                         r"^LOOPPROOF_", re.IGNORECASE)
MIN_LEN = 8
PUBLIC = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PWD", "SHELL"})


def secret_name(name: str) -> bool:
    """Does this variable name say that it holds a secret (`SECRET_NAME`)?"""
    return name not in PUBLIC and SECRET_NAME.search(name) is not None


def secret_values(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """(name, value) of every secret-looking variable, longest value first (so a value that
    contains another is replaced whole)."""
    env = os.environ if environ is None else environ
    found = {(k, v) for k, v in env.items()
             if secret_name(k) and len(v) >= MIN_LEN}
    return tuple(sorted(found, key=lambda kv: (-len(kv[1]), kv[0])))


def redact_text(text: str, secrets: tuple[tuple[str, str], ...]) -> str:
    for name, value in secrets:
        if value in text:
            text = text.replace(value, f"[redacted {name}]")
    return text


def redact(obj: Any, secrets: tuple[tuple[str, str], ...]) -> Any:
    """`obj` (JSON-like) with every secret value in its strings replaced; keys too."""
    if not secrets:
        return obj
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    if isinstance(obj, list | tuple):
        return [redact(x, secrets) for x in obj]
    if isinstance(obj, dict):
        return {redact_text(k, secrets) if isinstance(k, str) else k: redact(v, secrets)
                for k, v in obj.items()}
    return obj
