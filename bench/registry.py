"""The benchmark registry: each module of bench/ registers `name -> fn(args) -> dict`.

Why a registry module of its own: the command (`python -m bench`) imports every benchmark module,
and the modules import only this one, so nothing in bench/ imports in a circle.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Benchmark = Callable[[argparse.Namespace], dict]
BENCHMARKS: dict[str, Benchmark] = {}


def register(name: str, fn: Benchmark) -> None:
    """Add a benchmark; its result dict appears under `name` in bench.json."""
    BENCHMARKS[name] = fn
