"""Red team: a worker that tries to reach its gate through state that outlives the attempt, or
to reach the engine through the network namespace it shares.

Promises (docs/threat-model.md): a private /tmp, /var/tmp and /dev/shm per command, empty at its
start and gone at its end (and /run masked); the host read-only (the gate's interpreter, its
site-packages, the loader's preload list, locale and time-zone files, git's system config); no
network unless the node asks, and a gate never has it. The attacks:

- plant start-up code everywhere a later Python could look for it (sitecustomize/usercustomize
  and `.pth` files in every temp folder and under its HOME, PYTHONSTARTUP files) and leave
  markers in every temp folder; the gate, and the next node's gate, accept if they see any;
- probe (with access(2), so a broken sandbox writes nothing on the host) whether the places a
  gate reads at start-up are writable: the interpreter's prefix and site-packages,
  /etc/ld.so.preload, /etc/gitconfig, the locale and zoneinfo folders, /usr/local/bin;
- connect to an abstract Unix socket the engine's side holds (abstract sockets are scoped by
  network namespace, not by the file system, so no mount hides them);
- leave work for later: write a cron or at spool or a unit folder, or ask a service manager
  (D-Bus, systemd, any service socket under /run) to start a job after the attempt.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import sysconfig
import threading
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load

PY = sys.executable


def run(path: Path, ledger: Path) -> tuple[int, list[dict]]:
    runner = Runner.start(load(path), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    return code, [json.loads(x) for x in ledger.read_text().splitlines()]


def node(name: str, worker: list[str], gate: list[str], more: str = "") -> str:
    return (f"[node.{name}]\nworker = {json.dumps(worker)}\ngate = {json.dumps(gate)}\n"
            f"spend_ceiling = 30.0\ntimeout_s = 20\ngate_timeout_s = 20\n{more}\n")


def graph(tmp_path: Path, nodes: str) -> Path:
    path = tmp_path / "graph.toml"
    path.write_text(f"[graph]\nspend_budget = 100.0\n\n{nodes}")
    return path


def verdicts(records: list[dict]) -> list[tuple[str, str]]:
    return [(r["node"], r["verdict"]) for r in records if r["type"] == "verdict"]


PLANT = """
import os, sys
mark = sys.argv[1]
open("answer.txt", "w").write("41\\n")
code = "import os; os._exit(0)\\n"  # a gate that runs this accepts at once
ver = "python%d.%d" % sys.version_info[:2]
for base in ("/tmp", "/var/tmp", "/dev/shm", "/run", os.environ["HOME"], os.environ["TMPDIR"]):
    for rel in ("", ".local/lib/%s/site-packages" % ver):
        d = os.path.join(base, rel)
        try:
            os.makedirs(d, exist_ok=True)
            for name in ("sitecustomize.py", "usercustomize.py", "startup.py"):
                open(os.path.join(d, name), "w").write(code)
            open(os.path.join(d, "zz-%s.pth" % mark), "w").write(code)
            open(os.path.join(d, mark), "w").write("left behind\\n")
        except OSError:
            pass
"""

# accepts if it sees any marker the worker left, else judges the answer with Python
SEES = ("for d in /tmp /var/tmp /dev/shm /run \"$HOME\"; do [ -e \"$d/{mark}\" ] && exit 0; done; "
        "PYTHONSTARTUP=/tmp/startup.py {py} -c \"import sys; "
        "sys.exit(0 if open('answer.txt').read().strip() == '42' else 1)\"")


def test_nothing_a_worker_leaves_in_temp_folders_reaches_a_gate(tmp_path: Path) -> None:
    mark = f"lp-redteam-{secrets.token_hex(6)}"
    (tmp_path / "plant.py").write_text(PLANT)
    gate = ["sh", "-c", SEES.format(mark=mark, py=PY)]
    # b's worker copies a's (wrong) answer; b's gate looks for a's markers too
    nodes = (node("a", [PY, "plant.py", mark], gate, "attempts = 2")
             + node("b", ["sh", "-c", "cp inputs/a/answer.txt ."], gate, 'needs = ["a"]'))
    try:
        code, records = run(graph(tmp_path, nodes), tmp_path / "L.jsonl")
    finally:
        leaked = unplant(mark)
    assert verdicts(records) == [("a", "reject"), ("a", "reject")] and code == 3
    assert leaked == []


def unplant(mark: str) -> list[str]:
    """Remove (and name) what a worker planted in the host's temp folders: a broken sandbox
    must not leave start-up code there for other programs."""
    out = []
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run"):
        for name in (mark, f"zz-{mark}.pth", "sitecustomize.py", "usercustomize.py",
                     "startup.py"):
            p = Path(d) / name
            try:
                if name == mark or p.read_text() == "import os; os._exit(0)\n":
                    p.unlink()
                    out.append(str(p))
            except OSError:
                continue
    return out


WRITABLE = """
import json, os, sys
paths = json.loads(sys.argv[1])
print(json.dumps({p: os.access(p, os.W_OK) for p in paths if os.path.lexists(p)}))
"""


def test_what_a_gate_reads_at_start_up_is_read_only_to_a_worker(tmp_path: Path) -> None:
    (tmp_path / "writable.py").write_text(WRITABLE)
    paths = sorted({sys.prefix, sys.base_prefix, sysconfig.get_path("purelib"),
                    sysconfig.get_path("stdlib"), os.path.dirname(os.path.realpath(PY)),
                    "/etc", "/etc/ld.so.preload", "/etc/gitconfig", "/usr/lib/locale",
                    "/usr/share/zoneinfo", "/etc/localtime", "/usr/local/bin", "/usr/bin",
                    "/usr/lib", str(tmp_path)})
    code, records = run(graph(tmp_path, node("a", [PY, "writable.py", json.dumps(paths)],
                                              ["true"])), tmp_path / "L.jsonl")
    seen = json.loads([r for r in records if r["type"] == "claim"][0]["claims"]["stdout"]["tail"])
    assert code == 0 and seen and sys.prefix in seen
    assert {p: w for p, w in seen.items() if w} == {}


@pytest.fixture
def abstract_server():
    """An abstract Unix socket held on the engine's side; the names of the clients that got
    through."""
    name = f"\0lp-redteam-{secrets.token_hex(6)}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(8)
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    got.append(conn.recv(64))

    threading.Thread(target=serve, daemon=True).start()
    yield name[1:], got
    server.close()


CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\\0" + sys.argv[1]); s.sendall(sys.argv[2].encode()); r = "connected"
except OSError as exc:
    r = "failed:" + type(exc).__name__
open("got", "w").write(r) if len(sys.argv) < 4 else sys.exit(0 if r == "connected" else 1)
"""


@pytest.mark.parametrize("network", [False, True])
def test_an_abstract_socket_of_the_host_is_out_of_reach_without_the_network(
        tmp_path: Path, abstract_server, network: bool) -> None:
    name, got = abstract_server
    (tmp_path / "connect.py").write_text(CONNECT)
    more = "network = true\n" if network else ""
    # the gate tries too, and accepts only if it got through: a gate never has the network
    gate = [PY, str(tmp_path / "connect.py"), name, "gate", "exit"]
    code, records = run(graph(tmp_path, node("a", [PY, "connect.py", name, "worker"], gate,
                                              more)), tmp_path / "L.jsonl")
    seen = (tmp_path / "L.jsonl.work" / "a" / "got").read_text()
    assert verdicts(records) == [("a", "reject")]
    # with `network = true` the worker shares the host's abstract sockets (as documented)
    assert seen == "connected" if network else seen.startswith("failed:")
    assert b"gate" not in b"".join(got)


SCHEDULE = """
import json, os, socket, sys
out = {"writable": {p: os.access(p, os.W_OK) for p in json.loads(sys.argv[1])
                    if os.path.lexists(p)}, "sockets": {}}
for p in json.loads(sys.argv[2]):  # the services that run a job later, on request
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        out["sockets"][p] = "connected"
    except OSError as exc:
        out["sockets"][p] = type(exc).__name__
print(json.dumps(out))
"""


def test_a_worker_cannot_leave_work_for_later(tmp_path: Path) -> None:
    # at/cron spools and unit folders are read-only, and the service managers' sockets (D-Bus,
    # systemd, a database's) sit under the masked /run: no job outlives the attempt that way
    (tmp_path / "schedule.py").write_text(SCHEDULE)
    service = Path("/run") / f"lp-redteam-{secrets.token_hex(6)}.sock"  # a service of the host
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(service))
    server.listen(1)
    spools = ["/etc/cron.d", "/etc/crontab", "/var/spool", "/var/spool/cron", "/var/spool/at",
              "/etc/systemd/system", "/usr/lib/systemd/system", "/etc/init.d", "/etc/profile.d"]
    sockets = sorted({str(service), "/run/dbus/system_bus_socket", "/run/systemd/private",
                      *(str(p) for p in Path("/run").glob("*/*") if p.is_socket())})
    try:
        code, records = run(graph(tmp_path, node("a", [PY, "schedule.py", json.dumps(spools),
                                                        json.dumps(sockets)], ["true"])),
                            tmp_path / "L.jsonl")
    finally:
        server.close()
        service.unlink()
    seen = json.loads([r for r in records if r["type"] == "claim"][0]["claims"]["stdout"]["tail"])
    assert code == 0 and seen["writable"]
    assert {p: w for p, w in seen["writable"].items() if w} == {}
    assert {p: r for p, r in seen["sockets"].items() if r == "connected"} == {}
