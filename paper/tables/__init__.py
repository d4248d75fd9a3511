"""Every table of the paper and of docs/results.md, each cell a template over results/ keys.

Why cells are templates: a table is then rendered twice (LaTeX, markdown) from one definition,
and every number in it names its key. Tables over a dict in results/ (crash sites, integrity
kinds, obligations, sweep budgets, benchmarks) take their rows from what the file holds, so a
site, a kind or an obligation a helper adds appears without an edit here. A table whose study
was not run renders as one "not run" row, never as an error.

One module per family of tables (obligations, summaries, gates, transitions, growth, runs), over
the table and its renderings (table.py); `BUILDERS` names them all in the order they are built.
"""

from __future__ import annotations

from collections.abc import Callable

from paper.tables.gates import audit_median, audit_median_accepts, mutant_flags, mutants
from paper.tables.growth import growth_arms, growth_calibration, growth_controls, growth_sweep
from paper.tables.obligations import counterexamples, proof_counts, proofs
from paper.tables.runs import bench, examples
from paper.tables.summaries import SUMMARY_ROWS, crash_sites, integrity_kinds, summary
from paper.tables.table import Cell, Lit, Table, latex, markdown
from paper.tables.transitions import TRANSITION_ROWS, transition
from paper.tree import Results

__all__ = [
    "BUILDERS", "SUMMARY_ROWS", "TRANSITION_ROWS", "Cell", "Lit", "Table", "build_all",
    "latex", "markdown", "proofs", "summary",
]

BUILDERS: dict[str, Callable[[Results], Table]] = {
    "proofs": proofs, "proof_counts": proof_counts, "counterexamples": counterexamples,
    "bounds": summary("bounds"), "crash": summary("crash"), "crash_sites": crash_sites,
    "integrity": summary("integrity"), "integrity_kinds": integrity_kinds,
    "mutants": mutants, "mutant_flags": mutant_flags, "transition": transition,
    "growth": summary("growth"), "growth_arms": growth_arms, "growth_sweep": growth_sweep,
    "growth_controls": growth_controls, "growth_calibration": growth_calibration,
    "bench": bench, "examples": examples,
    "audit_median": audit_median, "audit_median_accepts": audit_median_accepts,
}


def build_all(results: Results) -> dict[str, Table]:
    return {name: b(results) for name, b in BUILDERS.items()}
