"""`loopproof conformance`: run the admission layer's conformance cases (docs/conformance.md).
Exit 0 when every case passes, 1 when one fails, 2 for an unknown case id."""

from __future__ import annotations

import argparse

from loopproof.engine.admission.conformance.suite import add_arguments as _add_arguments
from loopproof.engine.admission.conformance.suite import run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    return run(args)
