"""The benchmark command at a tiny size: it runs, merges registered figures, cleans up."""

import json
import os

from bench import cli as bench
from bench.registry import BENCHMARKS
from bench.registry import register as bench_register
from bench.targets import figure, figures, line

# ---- the benchmark, at a tiny size -----------------------------------------------------------------

def test_bench_runs_small_and_merges_registered_figures(tmp_path, capsys):
    bench_register("fake", lambda args: {"records_seen": args.records})
    try:
        assert bench.main(["--records", "60", "--fsync-records", "5", "--group-size", "7",
                           "--repeat", "1", "--out", str(tmp_path), "--json",
                           "--only", "ledger", "--only", "fake"]) == 0
    finally:
        del BENCHMARKS["fake"]
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert f"on {os.cpu_count()} cores" in captured.err.splitlines()[-1]
    stored = json.loads((tmp_path / "bench.json").read_text())
    assert printed == stored and stored["fake"] == {"records_seen": 60}
    assert set(stored["machine"]) == {"cores", "load_1min_before", "load_1min_after",
                                      "elapsed_s", "quick"}
    assert set(stored["machine"]["elapsed_s"]) == {"ledger", "fake"}
    assert stored["machine"]["quick"] is False
    ledger = stored["ledger"]
    assert ledger["records"] == 60 and ledger["fsync_records"] == 5
    assert ledger["appends_per_s_group"] > 0 and ledger["verified_records_per_s"] > 0
    assert ledger["ratio_vs_peer"]["verify"] == round(ledger["verified_records_per_s"] / 140_000, 2)
    assert ledger["group_commit"]["target"] == 50_000 and ledger["verify_peak_memory"]["value"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]  # the ledgers are cleaned up
    assert bench.main(["--out", str(tmp_path), "--only", "nope"]) == 2


def test_quick_shrinks_the_rate_sizes_skips_what_reproduce_measures_and_a_given_size_wins(
        tmp_path, capsys):
    """`--quick` (make reproduce's bench): smaller sizes where the target is a rate or a ratio,
    best of one, without the explorer, the proofs and the newcomer's path; a size given on the
    command line is kept."""
    seen: list = []
    bench._load_modules()
    saved = dict(BENCHMARKS)
    BENCHMARKS.clear()
    for name in saved:
        bench_register(name, lambda args, name=name: seen.append((name, args)) or {})
    try:
        assert bench.main(["--quick", "--out", str(tmp_path), "--json", "--records",
                           "5000"]) == 0
    finally:
        BENCHMARKS.clear()
        BENCHMARKS.update(saved)
    ran = {name for name, _ in seen}
    assert ran == set(saved) - set(bench.QUICK_SKIP) and ran
    args = seen[0][1]
    assert (args.records, args.chain_nodes, args.repeat) == (5000, 2000, 1)
    assert args.bound_nodes == 100_000  # an absolute target at its own size stays
    machine = json.loads(capsys.readouterr().out)["machine"]
    assert machine["quick"] is True and set(machine["elapsed_s"]) == ran


def test_the_ledger_benchmark_counts_the_verifying_pool(tmp_path, monkeypatch):
    """verified_records_per_cpu_s counted the parent's CPU only, while verify hashes a large
    ledger in a pool of processes: a verify whose work is done by a child must be charged it."""
    from bench import ledger as ledger_bench

    real = ledger_bench.verify

    def in_a_child(path):
        import subprocess
        import sys
        subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
        return real(path)
    monkeypatch.setattr(ledger_bench, "verify", in_a_child)
    args = bench.parse_args(["--records", "50", "--fsync-records", "3", "--repeat", "1",
                             "--out", str(tmp_path)])
    got = ledger_bench.bench_ledger(args)
    assert got["verified_records_per_cpu_s"] < 50 / 0.05  # the child's ~0.1+ CPU-s is counted


def test_proxy_benchmark_is_registered_and_runs_small(monkeypatch):
    from bench import proxy as proxy_bench

    assert "bench.proxy" in bench.MODULES
    bench._load_modules()
    assert BENCHMARKS["proxy_overhead"] is proxy_bench.bench_proxy
    monkeypatch.setattr(proxy_bench, "CALLS", 16)
    monkeypatch.setattr(proxy_bench, "ROUNDS", 1)
    monkeypatch.setattr(proxy_bench, "THREADS", 4)
    figures = proxy_bench.bench_proxy(None)
    assert figures["calls"] == 16 and figures["threads"] == 4
    assert figures["direct_ms_per_call"] > 0 and figures["proxied_ms_per_call"] > 0
    assert abs(figures["added_ms_per_call"] - (figures["proxied_ms_per_call"]
                                               - figures["direct_ms_per_call"])) <= 0.002
    assert figures["proxied_calls_per_s"] > 0 and figures["direct_calls_per_s"] > 0


def test_every_figure_is_printed_beside_its_target(tmp_path, capsys, monkeypatch):
    """The benchmarks of the targets table at tiny sizes: each figure has a value, a target,
    their ratio and the word met or missed; without the peer venv the quoted figures say so."""
    from bench import startup

    monkeypatch.setattr(startup, "MIN_ROUNDS", 1)  # one round of its three starts, not five
    assert bench.main(["--out", str(tmp_path), "--json", "--repeat", "1",
                       "--bound-nodes", "40", "--chain-nodes", "8", "--replay-nodes", "30",
                       "--explore-nodes", "2", "--peer-python", str(tmp_path / "no-peer"),
                       "--only", "bound", "--only", "chain", "--only", "replay",
                       "--only", "startup", "--only", "explorer", "--only", "peer"]) == 0
    captured = capsys.readouterr()
    stored = json.loads((tmp_path / "bench.json").read_text())
    found = figures(stored)
    names = {name for name, _ in found}
    assert {"bound.chain.seconds", "bound.fan.peak_memory", "bound.random.seconds",
            "chain.overhead_ratio", "replay.seconds", "startup.help", "startup.verify",
            "explorer.seconds"} <= names
    for name, f in found:
        assert f["verdict"] in ("met", "missed") and f["target"] > 0, name
        assert f["ratio_to_target"] == round(f["value"] / f["target"], 3), name
        assert line(name, f) in captured.err
    assert stored["peer"]["status"].startswith("not installed")
    assert stored["peer"]["quoted"]["append_s_at_1M_records"] == 4.2
    assert stored["bound"]["chain"]["bounds"]["W"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]


def test_a_figure_says_met_or_missed_by_direction():
    assert figure(4.0, 5.0, "s")["verdict"] == "met"
    assert figure(6.0, 5.0, "s")["verdict"] == "missed"
    assert figure(60_000, 50_000, "appends/s", "higher")["verdict"] == "met"
    assert figure(40_000, 50_000, "appends/s", "higher")["verdict"] == "missed"


def test_a_figures_ratio_is_its_printed_value_over_its_target():
    """The ratio is computed from the value as stored and printed (rounded to 4 places), so a
    reader dividing the two printed numbers gets the printed ratio: 0.93251 / 5 is 0.186502
    (0.187) while 0.93251 prints as 0.9325, whose quotient 0.1865 rounds to 0.186."""
    for value in (0.93257, 0.93251, 0.18651, 4.99996):
        f = figure(value, 5.0, "s")
        assert f["ratio_to_target"] == round(f["value"] / f["target"], 3), value


def test_fan_benchmark_runs_small_and_checks_every_ledger(tmp_path):
    """The parallel-attempts fan (bench/fan.py) at 4 nodes of 0.2 s: the run at --jobs 4 is
    faster than the serial one, and every ledger is verified with G3 at every prefix."""
    from bench import fan

    assert "bench.fan" in bench.MODULES
    bench._load_modules()
    assert BENCHMARKS["fan"] is fan.bench_fan
    args = bench.parse_args(["--fan-nodes", "4", "--fan-sleep", "0.2", "--fan-jobs", "1,4",
                             "--out", str(tmp_path)])
    got = fan.bench_fan(args)
    assert [r["jobs"] for r in got["runs"]] == [1, 4]
    assert all(r["exit"] == 0 and r["verified"] and r["g3_every_prefix"] and r["records"] > 4
               for r in got["runs"])
    assert got["done_when"]["every_ledger_verified"] and got["done_when"]["g3_every_prefix"]
    assert got["speedup_jobs4"]["value"] > 1.5  # 4 waits of 0.2 s at once, not one by one
    assert got["overhead_jobs4"]["target"] == fan.OVERHEAD_RATIO
