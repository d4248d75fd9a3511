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
    assert set(stored["machine"]) == {"cores", "load_1min_before", "load_1min_after"}
    ledger = stored["ledger"]
    assert ledger["records"] == 60 and ledger["fsync_records"] == 5
    assert ledger["appends_per_s_group"] > 0 and ledger["verified_records_per_s"] > 0
    assert ledger["ratio_vs_peer"]["verify"] == round(ledger["verified_records_per_s"] / 140_000, 2)
    assert ledger["group_commit"]["target"] == 50_000 and ledger["verify_peak_memory"]["value"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]  # the ledgers are cleaned up
    assert bench.main(["--out", str(tmp_path), "--only", "nope"]) == 2


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


def test_every_figure_is_printed_beside_its_target(tmp_path, capsys):
    """The benchmarks of the targets table at tiny sizes: each figure has a value, a target,
    their ratio and the word met or missed; without the peer venv the quoted figures say so."""
    assert bench.main(["--out", str(tmp_path), "--json", "--repeat", "1",
                       "--bound-nodes", "40", "--chain-nodes", "20", "--replay-nodes", "30",
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
