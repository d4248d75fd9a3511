"""The benchmark command at a tiny size: it runs, merges registered figures, cleans up."""

import json

from bench import cli as bench
from bench.registry import BENCHMARKS
from bench.registry import register as bench_register

# ---- the benchmark, at a tiny size -----------------------------------------------------------------

def test_bench_runs_small_and_merges_registered_figures(tmp_path, capsys):
    bench_register("fake", lambda args: {"records_seen": args.records})
    try:
        assert bench.main(["--records", "60", "--fsync-records", "5", "--group-size", "7",
                           "--repeat", "1", "--out", str(tmp_path), "--json",
                           "--only", "ledger", "--only", "fake"]) == 0
    finally:
        del BENCHMARKS["fake"]
    printed = json.loads(capsys.readouterr().out)
    stored = json.loads((tmp_path / "bench.json").read_text())
    assert printed == stored and stored["fake"] == {"records_seen": 60}
    figures = stored["ledger"]
    assert figures["records"] == 60 and figures["fsync_records"] == 5
    assert figures["appends_per_s_group"] > 0 and figures["verified_records_per_s"] > 0
    assert figures["ratio_vs_peer"]["verify"] == round(figures["verified_records_per_s"] / 140_000, 2)
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
