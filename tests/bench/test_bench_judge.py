"""bench/judge.py at its smallest: the calls judge and the command gate both accept the correct
median on the same 100 cases, and their ratio is reported against its target."""

from __future__ import annotations

import argparse

from bench.judge import CASES, TARGET_RATIO, bench_judge


def test_the_judge_bench_times_both_gates_on_the_same_cases(tmp_path) -> None:
    r = bench_judge(argparse.Namespace(out=str(tmp_path), repeat=1, quick=True))
    f = r["calls_to_command"]
    assert r["cases"] == CASES and f["target"] == TARGET_RATIO and f["unit"] == "x"
    assert abs(f["value"] - r["calls_ms"] / r["command_gate_ms"]) < 0.01
    assert "program_ms" not in r  # one launch per case: left out of --quick
    assert list(tmp_path.iterdir()) == []  # its scratch folder is removed
