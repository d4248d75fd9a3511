"""Resource limits in graph.toml (engine/run/spec.py) and how they are held
(engine/system/limits/): bad values are refused like every bad spec, defaults apply, a node's
value beats the graph's, and the fallback to rlimits says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.system import limits
from loopproof.engine.system.judged import DEFAULT_MAX_BYTES
from loopproof.engine.system.limits import Hold, ResourceLimits, holders
from loopproof.engine.system.process import run_command
from loopproof.engine.system.sandbox import Confinement, View, backend
from tests.support.paths import REPO
from tests.support.specs import command_node, write_spec


def write(tmp_path: Path, graph: dict | None = None, node: dict | None = None) -> Path:
    return write_spec(tmp_path, {"a": command_node(["/bin/true"], ["/bin/true"], spend_ceiling=1.0,
                                                   **(node or {}))},
                      spend_budget=5.0, **(graph or {}))


BAD = [("max_memory_bytes", -1), ("max_memory_bytes", 1024), ("max_memory_bytes", 1.5e9),
       ("max_memory_bytes", True), ("max_processes", 0), ("max_processes", "many"),
       ("max_processes", 99999999999), ("max_tmp_bytes", 1), ("max_tmp_bytes", [])]


@pytest.mark.parametrize("where", ["graph", "node"])
@pytest.mark.parametrize(("field", "value"), BAD)
def test_a_bad_limit_is_one_line_naming_file_field_and_fix(tmp_path: Path, capsys, where: str,
                                                          field: str, value: object) -> None:
    line = {field: value}
    p = write(tmp_path, line if where == "graph" else None, line if where == "node" else None)
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(p), "--ledger", str(ledger)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert str(p) in err[0] and field in err[0] and "fix:" in err[0], err[0]
    assert (f"node 'a', field '{field}'" if where == "node" else f"[graph] {field}") in err[0]
    assert not ledger.exists()


def test_defaults_then_the_graphs_then_the_nodes(tmp_path: Path) -> None:
    d = spec_mod.DEFAULT_RESOURCES
    got = spec_mod.load(write(tmp_path)).nodes["a"].resources
    assert got == ResourceLimits(d["max_memory_bytes"], d["max_processes"], d["max_tmp_bytes"],
                                 DEFAULT_MAX_BYTES)
    p = write(tmp_path, {"max_processes": 100, "max_memory_bytes": 33554432},
              {"max_processes": 50, "max_workspace_bytes": 4096})
    got = spec_mod.load(p).nodes["a"].resources
    assert got == ResourceLimits(32 << 20, 50, d["max_tmp_bytes"], 4096)
    # the defaults keep one careless graph inside a 2-core, 24 GiB machine
    assert d["max_memory_bytes"] + d["max_tmp_bytes"] <= (24 << 30) // 4
    assert d["max_processes"] <= 1024


def test_the_limit_in_words() -> None:
    lim = ResourceLimits(256 << 20, 64, 1 << 30, 1536 << 20)
    assert [lim.text(k) for k in limits.KINDS] == [
        "memory limit 256 MiB", "process limit 64", "tmp limit 1 GiB", "workspace limit 1.5 GiB"]
    assert limits.size_text(4097) == "4097 bytes"


def test_where_no_cgroup_holds_them_rlimits_do_and_the_record_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no usable cgroup (planted: none found), memory and processes fall back to rlimits,
    recorded as "rlimit": a hog gets a MemoryError at RLIMIT_AS instead of the machine's RAM."""
    monkeypatch.setattr(limits, "_mechanisms", [])
    lim = ResourceLimits(memory_bytes=128 << 20, processes=64)
    assert holders(lim, sized_tmp=False) == {"memory": "rlimit", "processes": "rlimit",
                                             "lifecycle": "process-group"}
    box = Confinement(backend("none"), View(), hold=Hold(lim, "fallback", "hog"))
    hog = "x = []\nwhile True:\n    x.append(bytearray(1 << 20))\n"
    res = run_command([sys.executable, "-c", hog], tmp_path, 30, confine=box)
    assert res.returncode == 1 and b"MemoryError" in res.stderr, res.stderr[-300:]
    assert res.held is not None and res.held["memory"] == "rlimit"


def test_this_host_holds_memory_and_processes_in_a_cgroup() -> None:
    """On the machines make check runs on (cgroup v1 memory and pids, or v2 with them), the
    engine holds both limits in a cgroup and kills by cgroup: not the weaker fallbacks."""
    held = holders(ResourceLimits(1 << 30, 100), sized_tmp=True)
    assert held["memory"].startswith("cgroup") and held["processes"].startswith("cgroup"), held
    assert held["lifecycle"].startswith("cgroup"), held
    assert json.dumps(held)  # recordable as is


def test_the_documented_defaults_are_the_engines() -> None:
    """docs/engine.md's table of limits states the defaults the spec applies."""
    text = (REPO / "docs" / "engine.md").read_text()
    d = spec_mod.DEFAULT_RESOURCES
    for field, shown in (("max_memory_bytes", limits.size_text(d["max_memory_bytes"])),
                         ("max_processes", str(d["max_processes"])),
                         ("max_tmp_bytes", limits.size_text(d["max_tmp_bytes"])),
                         ("max_workspace_bytes", limits.size_text(DEFAULT_MAX_BYTES))):
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| `{field}` |"))
        assert f"| {shown} |" in row, row
