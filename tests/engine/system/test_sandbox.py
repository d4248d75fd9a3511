"""The sandbox every worker and gate command runs in (engine/system/sandbox/, wired by
engine/run/confine.py): what a worker and a gate can see and touch, the network switch, the
socket hook, `sandbox = "none"` (recorded, warned, reported), a missing bwrap (exit 2, nothing
written), pinned interpreters (a change stops the run, exit 5), and the mount plan itself."""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import threading
from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import Spec, load
from loopproof.engine.system import programs, sandbox
from loopproof.engine.system.process import ProcessError, run_command, safe_environment
from loopproof.engine.system.sandbox import Confinement, View
from loopproof.engine.system.sandbox.bwrap import Bwrap, bwrap_argv, mount_plan
from tests.support.specs import command_node, write_spec


def graph(tmp_path: Path, nodes: dict, **fields: object) -> Path:
    return write_spec(tmp_path, nodes, spend_budget=100.0, **fields)


def node(name: str, worker: list[str], gate: list[str], **more: object) -> dict:
    return {name: command_node(worker, gate, spend_ceiling=30.0, timeout_s=20, gate_timeout_s=20,
                               **more)}


def run(path: Path, ledger: Path, setup=None) -> tuple[int, list[dict]]:
    runner = Runner.start(load(path), ledger)
    if setup is not None:
        setup(runner)
    try:
        code = runner.run()
    finally:
        runner.close()
    return code, [json.loads(x) for x in ledger.read_text().splitlines()]


def claims(records: list[dict], name: str) -> list[dict]:
    return [r["claims"] for r in records if r["type"] == "claim" and r["node"] == name]


# ---- what a worker sees -----------------------------------------------------------------------

PROBE = """
import json, os, sys
out = {}
def attempt(name, fn):
    try:
        out[name] = fn()
    except OSError as exc:
        out[name] = "denied:" + type(exc).__name__
ledger, spec_dir, home_secret, engine_tmp, mark = sys.argv[1:6]
gate_file = os.path.join(spec_dir, "check.py")
home_secret = home_secret.removeprefix("at:")  # not a path in argv: argv paths are readable
engine_tmp = engine_tmp.removeprefix("at:")
attempt("ledger", lambda: open(ledger).read())
attempt("siblings", lambda: sorted(os.listdir("..")))
attempt("accepted", lambda: os.listdir(ledger + ".accepted"))
attempt("gate_file", lambda: open(gate_file).read())
attempt("home_secret", lambda: open(home_secret).read())
attempt("write_spec_dir", lambda: open(os.path.join(os.path.dirname(ledger), "x"), "w").write("x"))
attempt("write_etc", lambda: open("/etc/loopproof-x", "w").write("x"))
attempt("engine_tmp", lambda: os.listdir(engine_tmp))
attempt("write_tmp", lambda: open(os.path.join(os.environ["TMPDIR"], "t"), "w").write("t"))
attempt("processes", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
attempt("write_ws", lambda: open("out.txt", "w").write("ok"))
attempt("caps", lambda: [x.split()[1] for x in open("/proc/self/status") if x.startswith("CapEff")])
attempt("remount", lambda: os.system(f"mount -o remount,rw / 2>/dev/null; touch /{mark} "
                                     "2>/dev/null"))
print(json.dumps(out))
"""


def test_a_worker_sees_its_workspace_and_nothing_of_the_run(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "check.py").write_text("import sys; sys.exit(0)  # the gate's secret\n")
    ledger = tmp_path / "L.jsonl"
    secret = Path.home() / f".loopproof-test-{secrets.token_hex(8)}"
    mark = f"loopproof-remounted-{secrets.token_hex(8)}"  # what a remount would let it create
    secret.write_text("operator secret\n")
    engine_tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        worker = [sys.executable, "probe.py", str(ledger), str(tmp_path),
                  f"at:{secret}", f"at:{engine_tmp}", mark]
        nodes = (node("first", ["sh", "-c", "echo hi > first.txt"], ["true"])
                 | node("a", worker, [sys.executable, "check.py"], needs=["first"]))
        code, records = run(graph(tmp_path, nodes), ledger)
    finally:
        secret.unlink()
    assert code == 0
    seen = json.loads(claims(records, "a")[0]["stdout"]["tail"])
    assert seen["ledger"] in ("", "denied:PermissionError")  # covered by /dev/null
    assert seen["siblings"] == ["a"]  # not `first`'s workspace
    assert seen["accepted"] == []  # judged snapshots: an empty folder
    assert seen["gate_file"] in ("", "denied:PermissionError")
    assert seen["home_secret"].startswith("denied")  # the engine user's home is masked
    assert seen["write_spec_dir"].startswith("denied")
    assert seen["write_etc"].startswith("denied")
    assert seen["write_tmp"] == 1  # a private temp folder
    if engine_tmp != Path("/tmp"):
        assert seen["engine_tmp"] != sorted(os.listdir(engine_tmp))
    assert len(seen["processes"]) <= 3  # its own PID namespace: the engine is not there
    assert seen["write_ws"] == 2
    assert seen["caps"] == ["0000000000000000"]  # no capability, even run as root
    assert not Path("/", mark).exists()  # so the read-only view cannot be remounted
    assert (Path(f"{ledger}.work") / "a" / "out.txt").read_text() == "ok"
    assert not (tmp_path / "x").exists() and not Path("/etc/loopproof-x").exists()


GATE_PROBE = """
import json, os, sys
out = {"home": os.environ["HOME"], "path": os.environ["PATH"],
       "flags": [os.environ.get(k) for k in
                 ("PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE")],
       "home_entries": os.listdir(os.environ["HOME"]), "cwd_entries": sorted(os.listdir("."))}
try:
    open("scribble", "w").write("x")
    out["write"] = "allowed"
except OSError:
    out["write"] = "denied"
try:
    out["live"] = os.listdir(sys.argv[1])
except OSError:
    out["live"] = "denied"
print(json.dumps(out))
"""


def test_a_gate_sees_a_read_only_copy_and_a_fresh_home(tmp_path: Path) -> None:
    (tmp_path / "gate.py").write_text(GATE_PROBE)
    ledger = tmp_path / "L.jsonl"
    live = f"{ledger}.work/a"
    worker = ["sh", "-c", "echo answer > out.txt; mkdir -p .local; echo x > .local/evil.pth"]
    code, records = run(graph(tmp_path, node("a", worker, [sys.executable, "gate.py", live])),
                        ledger)
    verdict = next(r for r in records if r["type"] == "verdict")
    seen = json.loads(verdict["detail"].split("; ", 1)[1])
    assert code == 0
    assert seen["flags"] == ["1", "1", "1"] and seen["path"] == "/usr/local/bin:/usr/bin:/bin"
    assert seen["home_entries"] == [] or ".local" not in seen["home_entries"]
    assert seen["cwd_entries"] == [".local", "out.txt"] and seen["write"] == "denied"
    assert seen["live"] == [] or seen["live"] == "denied"  # the live workspace: hidden


# ---- network and sockets ------------------------------------------------------------------------

CONNECT = ("import socket, sys\n"
           "s = socket.socket()\ns.settimeout(3)\n"
           "try:\n    s.connect(('127.0.0.1', int(sys.argv[1]))); r = s.recv(10).decode()\n"
           "except OSError as exc:\n    r = 'failed:' + type(exc).__name__\n"
           "open('got', 'w').write(r)\n")


@pytest.mark.parametrize("network", [False, True])
def test_the_network_is_off_unless_the_node_asks(tmp_path: Path, network: bool) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        server.settimeout(10)
        try:
            conn, _ = server.accept()
            conn.sendall(b"hello")
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    (tmp_path / "connect.py").write_text(CONNECT)
    ledger = tmp_path / "L.jsonl"
    more = {"network": True} if network else {}
    try:
        code, _ = run(graph(tmp_path, node("a", [sys.executable, "connect.py", str(port)],
                                           ["true"], **more)), ledger)
    finally:
        server.close()
    got = (Path(f"{ledger}.work") / "a" / "got").read_text()
    assert code == 0
    assert got == "hello" if network else got.startswith("failed:")


def test_a_socket_bound_in_is_reachable_with_the_network_off(tmp_path: Path) -> None:
    path = tmp_path / "proxy.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        server.settimeout(20)
        try:
            conn, _ = server.accept()
            conn.sendall(b"metered")
            conn.close()
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    (tmp_path / "use.py").write_text(
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
        "open('got', 'w').write(s.recv(10).decode())\n")
    ledger = tmp_path / "L.jsonl"
    try:
        code, _ = run(graph(tmp_path, node("a", [sys.executable, "use.py", str(path)],
                                           ["true"])), ledger,
                      setup=lambda r: r.sandbox.bind_socket(path))
    finally:
        server.close()
    assert code == 0 and (Path(f"{ledger}.work") / "a" / "got").read_text() == "metered"


def test_a_writable_path_is_the_one_other_place_a_worker_writes(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    worker = ["sh", "-c", f"echo 1 >> {tmp_path}/cache/count; echo 2 > {tmp_path}/other; true"]
    code, _ = run(graph(tmp_path, node("a", worker, ["true"], writable=["cache"])),
                  tmp_path / "L.jsonl")
    assert code == 0 and (tmp_path / "cache" / "count").read_text() == "1\n"
    assert not (tmp_path / "other").exists()


def test_a_writable_path_may_not_hold_the_run(tmp_path: Path, capsys) -> None:
    spec = graph(tmp_path, node("a", ["true"], ["true"], writable=["."]))
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert "'writable'" in err and "fix:" in err and len(err.strip().splitlines()) == 1
    assert not ledger.exists()


# ---- sandbox = "none", a missing bwrap -----------------------------------------------------------

def test_sandbox_none_is_recorded_warned_and_reported(tmp_path: Path, capsys) -> None:
    spec = graph(tmp_path, node("a", ["true"], ["true"]), sandbox="none")
    ledger = tmp_path / "L.jsonl"
    capsys.readouterr()
    assert cli.main(["run", str(spec), "--ledger", str(ledger), "--json"]) == 0
    out = capsys.readouterr()
    assert 'warning: sandbox = "none"' in out.err
    assert json.loads(out.out)["sandbox"] == "none"
    assert json.loads(ledger.read_text().splitlines()[0])["sandbox"] == "none"
    assert cli.main(["resume", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr()
    assert 'warning: sandbox = "none"' in out.err and "sandbox none" in out.out


def test_the_default_sandbox_is_recorded(tmp_path: Path, capsys) -> None:
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(graph(tmp_path, node("a", ["true"], ["true"]))), "--ledger",
                     str(ledger)]) == 0
    assert "sandbox bwrap" in capsys.readouterr().out
    assert json.loads(ledger.read_text().splitlines()[0])["sandbox"] == "bwrap"


@pytest.mark.parametrize("broken", [Bwrap(program="no-such-bwrap"), Bwrap(program="/bin/false")])
def test_a_missing_or_unusable_bwrap_is_bad_input(tmp_path: Path, capsys, broken: Bwrap,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sandbox._cache, "bwrap", broken)
    spec = graph(tmp_path, node("a", ["true"], ["true"]))
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "[graph] sandbox" in err
    assert "bubblewrap" in err and 'sandbox = \\"none\\"' in err or 'sandbox = "none"' in err
    assert not ledger.exists() and not Path(f"{ledger}.work").exists()


@pytest.mark.parametrize("field,value", [("sandbox", "docker"), ("sandbox", True)])
def test_a_bad_sandbox_value_is_refused(tmp_path: Path, capsys, field: str, value: object) -> None:
    spec = graph(tmp_path, node("a", ["true"], ["true"]), **{field: value})
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "[graph] sandbox" in err and "fix:" in err


def test_a_bad_network_value_is_refused(tmp_path: Path, capsys) -> None:
    spec = graph(tmp_path, node("a", ["true"], ["true"], network="yes"))
    assert cli.main(["run", str(spec), "--ledger", str(tmp_path / "L.jsonl")]) == 2
    assert "'network'" in capsys.readouterr().err


# ---- interpreters pinned ------------------------------------------------------------------------

def test_the_gates_interpreter_is_pinned_and_a_change_stops_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "judge"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    spec = load(graph(tmp_path, node("a", ["true"], ["judge"])))
    assert spec.nodes["a"].gate.argv == (str(tool),)
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(spec, ledger)
    first = json.loads(ledger.read_text().splitlines()[0])
    assert str(tool) in first["pins"] and first["spec"]["programs"]["judge"] == str(tool)
    tool.write_text("#!/bin/sh\nexit 0 # another interpreter\n")
    try:
        assert runner.run() == 5
    finally:
        runner.close()
    changed = [json.loads(x) for x in ledger.read_text().splitlines()
               if json.loads(x)["type"] == "pin_changed"]
    assert changed and changed[0]["file"] == str(tool)


def test_resume_runs_the_programs_resolved_at_start(tmp_path: Path) -> None:
    spec = load(graph(tmp_path, node("a", ["true"], ["python3", "-c", "pass"])))
    record = spec.record()
    record["programs"] = {**record["programs"], "python3": sys.executable}
    again = Spec.from_record(record)
    assert again.nodes["a"].gate.argv[0] == sys.executable  # not looked up on PATH again


def test_relative_path_entries_are_ignored_and_a_shim_is_resolved(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "bin" / "python3").chmod(0o755)
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        found = programs.resolve("python3", tmp_path, path=f"bin{os.pathsep}{shim.parent}")
    finally:
        os.chdir(old)
    assert found == sys.executable  # not ./bin/python3, and the shim's interpreter


# ---- the process layer and the mount plan -------------------------------------------------------

def test_a_command_the_sandbox_cannot_start_is_an_error_not_an_exit_code(tmp_path: Path) -> None:
    (tmp_path / "hidden").mkdir()
    box = Confinement(sandbox.backend("bwrap"), View(
        readable=(tmp_path,), hidden=(tmp_path / "hidden",), private_home=True))
    hidden = tmp_path / "hidden" / "tool"  # exists, but not in the sandbox's view
    hidden.write_text("#!/bin/sh\nexit 1\n")
    hidden.chmod(0o755)
    with pytest.raises(ProcessError, match="sandbox could not start"):
        run_command([str(hidden)], tmp_path, 10, env=safe_environment(), confine=box)
    res = run_command(["sh", "-c", "exit 1"], tmp_path, 10, env=safe_environment(), confine=box)
    assert res.returncode == 1  # the command's own exit code


def test_the_mount_plan_orders_and_prunes(tmp_path: Path) -> None:
    tmp = str(tmp_path.resolve())
    spec, work = f"{tmp}/spec", f"{tmp}/spec/L.jsonl.work"
    ws = f"{work}/a"
    os.makedirs(ws)
    Path(f"{tmp}/spec/L.jsonl").write_text("")
    view = View(writable=(Path(ws),), readable=(Path("/usr"), Path(spec)),
                hidden=(Path(work), Path(f"{spec}/L.jsonl"), Path(f"{tmp}/gone")))
    plan = mount_plan(view, [tmp])
    assert plan == [("tmpfs", "", tmp), ("ro", spec, spec),  # /usr is visible already
                    ("hide-file", "", f"{spec}/L.jsonl"), ("hide-dir", "", work),
                    ("rw", ws, ws)]  # deeper paths after the folders that hold them
    argv = bwrap_argv("bwrap", ["true"], Path(ws), view, 9, [tmp])
    assert argv.index("--remount-ro") > argv.index("--bind")  # sealed after the bind inside
    assert "--cap-drop" in argv and "--unshare-net" in argv and "--die-with-parent" in argv


def test_the_mount_plan_resolves_a_path_through_a_link_once_and_as_it_is_now(
        tmp_path: Path, monkeypatch) -> None:
    """Each path is resolved once per plan (a resolve costs a stat per component, twice per
    readable path before) but never across plans: a link changed between two launches is
    followed where it points now. The depth order is the one `Path.parts` gives."""
    from loopproof.engine.system.sandbox import bwrap

    tmp = tmp_path.resolve()
    (tmp / "a" / "deep" / "er").mkdir(parents=True)
    (tmp / "b").mkdir()
    link = tmp / "link"
    link.symlink_to(tmp / "a")
    view = View(readable=(link, tmp / "a" / "deep" / "er"), hidden=(tmp / "gone",))
    calls: list[str] = []
    real = bwrap._real
    monkeypatch.setattr(bwrap, "_real", lambda p: calls.append(os.fspath(p)) or real(p))
    first = mount_plan(view, [str(tmp)])
    assert len(calls) == len(set(calls))
    assert ("ro", str(tmp / "a"), str(tmp / "a")) in first
    link.unlink()
    link.symlink_to(tmp / "b")
    second = mount_plan(view, [str(tmp)])
    assert ("ro", str(tmp / "b"), str(tmp / "b")) in second  # followed as it points now
    for p in ("/", "/a", "/a/b", str(tmp / "a" / "deep" / "er")):
        assert bwrap._depth(p) == len(Path(p).parts)
