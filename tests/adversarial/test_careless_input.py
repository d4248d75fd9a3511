"""Family: careless input and a hostile environment.

A graph.toml with a huge integer or a `1.7e308` ceiling, a 300-character or NUL-containing node
name, a read-only ledger folder and ten `run`s racing for one ledger path each ended in a
traceback (and the names also left a ledger behind). Each is one line naming the file, the field
and the fix, exit 2, and nothing written; the racing runs leave one run, untouched by the others.
A disk that fills up under a run is exit 5 with one line, and the run resumes once there is room.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from loopproof.engine.record.ledger import verify
from tests.support.engine_child import engine_run

from .conftest import error_lines

ACCEPT = "import sys\nsys.exit(0)\n"
REPO = Path(__file__).resolve().parents[2]


def graph_text(kit, graph: str = "spend_budget = 10.0\n", node: str = "", name: str = "a") -> str:
    body = (f"worker = {kit.argv('w.py', 'pass')}\ngate = {kit.argv('g.py', ACCEPT)}\n"
            "spend_ceiling = 1.0\n")
    return f"[graph]\n{kit.unsandboxed()}{graph}\n[node.{name}]\n{body}{node}"


def refused(kit, text: str, *words: str) -> None:
    spec = kit.tmp / "graph.toml"
    spec.write_text(text)
    r = kit.start(spec)
    assert r.code == 2 and r.one_line, (r.code, r.err)
    for w in words:
        assert w in r.err, (w, r.err)
    assert kit.leftovers() == []  # nothing written: no ledger, no folders


@pytest.mark.parametrize(("graph", "node", "field"), [
    ("spend_budget = 1" + "0" * 40 + "\n", "", "spend_budget"),
    ("spend_budget = 10.0\nrepair_budget = 1000000000000000000\n", "", "repair_budget"),
    ("spend_budget = 10.0\n", "attempts = 1" + "0" * 40 + "\n", "attempts"),
    ("spend_budget = 10.0\n", "attempts = 1000000000000000000\n", "attempts"),
    ("spend_budget = 1.7e308\n", "", "spend_budget"),
    ("spend_budget = 10.0\n", "spend_ceiling = 1.7e308\n", "spend_ceiling"),
    ("spend_budget = 10.0\n", "eval_reserve = 1e300\n", "eval_reserve"),
    ("spend_budget = 10.0\n", "timeout_s = 1e300\n", "timeout_s"),
    ("spend_budget = 10.0\nprice = 1e-320\n", "", "price"),
    ("spend_budget = 10.0\nmax_files = 0\n", "", "max_files"),
])
def test_numbers_out_of_range_are_one_line_and_nothing_written(kit, graph, node, field) -> None:
    text = graph_text(kit, graph, node)
    if "spend_ceiling = 1.7e308" in node:
        text = text.replace("spend_ceiling = 1.0\n", "")
    refused(kit, text, field)


@pytest.mark.parametrize("name", ['"' + "n" * 300 + '"', '"a\\u0000b"'])
def test_bad_names_are_one_line_and_write_no_ledger(kit, name) -> None:
    refused(kit, graph_text(kit, name=name), "safe node name")


@pytest.mark.parametrize("value", ['"a\\u0000b"', '"' + "p/" * 3000 + '"'])
def test_paths_that_cannot_exist_are_one_line(kit, value) -> None:
    refused(kit, graph_text(kit, node=f"gate_files = [{value}]\n"), "gate_files")


def test_values_nested_too_deeply_are_one_line(kit) -> None:
    refused(kit, graph_text(kit) + "extra = " + "[" * 50_000 + "]" * 50_000 + "\n", "(toml)")


def test_a_long_inline_script_is_an_argument_not_a_path(kit) -> None:
    script = "true; " * 1000  # 6000 characters: longer than any path can be
    spec = kit.tmp / "graph.toml"
    spec.write_text(graph_text(kit).replace(f"worker = {kit.argv('w.py', 'pass')}",
                                            f"worker = {json.dumps(['sh', '-c', script])}"))
    assert kit.start(spec).code == 0


@pytest.mark.parametrize("flag", ["--ledger", "--stop-file"])
def test_a_path_too_long_for_the_file_system_is_one_line(kit, flag) -> None:
    spec = kit.tmp / "graph.toml"
    spec.write_text(graph_text(kit))
    long = kit.ledger.parent / ("x" * 300)
    argv = ["run", spec, "--ledger", long if flag == "--ledger" else kit.ledger]
    if flag == "--stop-file":
        argv += ["--stop-file", long]
    r = kit.run(*argv)
    assert r.code == 2 and r.one_line and flag in r.err, r.err
    assert kit.leftovers() == []


def cli(*argv: object, timeout: float = 60, env: dict | None = None,
        prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "loopproof.engine.cli", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_a_spec_that_is_not_a_regular_file_is_one_line(kit) -> None:
    fifo = kit.tmp / "graph.toml"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    # in a process of its own (forked warm: tests/support/engine_child.py), killed if it waits
    p = engine_run(["cli", "run", str(fifo), "--ledger", str(kit.ledger)], timeout=30)
    assert p.returncode == 2 and "not a regular file" in p.stderr, p.stderr
    assert len(error_lines(p.stderr)) == 1


def read_only(folder: Path) -> tuple[str, ...]:
    """Run a command with `folder` mounted read-only (bubblewrap: root ignores mode bits)."""
    return ("bwrap", "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder))


def test_a_read_only_ledger_folder_is_one_line_and_nothing_written(kit) -> None:
    spec = kit.tmp / "graph.toml"
    spec.write_text(graph_text(kit))
    p = cli("run", spec, "--ledger", kit.ledger, prefix=read_only(kit.ledger.parent))
    assert p.returncode == 2, p.stderr
    assert len(error_lines(p.stderr)) == 1 and "Traceback" not in p.stderr
    assert "fix:" in p.stderr and kit.leftovers() == []


def test_resuming_in_a_read_only_folder_is_one_line_and_nothing_written(kit) -> None:
    spec = kit.tmp / "graph.toml"
    stop = kit.tmp / "STOP"
    spec.write_text(graph_text(kit).replace(kit.argv('w.py', 'pass'),
                                            kit.argv('w2.py', f"open({str(stop)!r}, 'w')")))
    assert kit.start(spec, "--stop-file", stop).code == 6
    stop.unlink()
    before = kit.ledger.read_bytes()
    p = cli("resume", "--ledger", kit.ledger, "--stop-file", stop,
            prefix=read_only(kit.ledger.parent))
    assert p.returncode == 2, p.stderr
    assert len(error_lines(p.stderr)) == 1 and "Traceback" not in p.stderr
    assert kit.ledger.read_bytes() == before


def test_ten_runs_racing_for_one_ledger_leave_one_run_untouched(kit) -> None:
    # the winner's worker keeps a file in its workspace for 3 s; a loser that deleted the
    # workspace meanwhile would make its gate reject (the file is gone)
    keep = ("import os, time\nopen('mine', 'w').close()\ntime.sleep(3)\n"
            "os.rename('mine', 'kept')\n")
    spec = kit.tmp / "graph.toml"
    spec.write_text(graph_text(kit).replace(kit.argv('w.py', 'pass'), kit.argv('keep.py', keep))
                    .replace(kit.argv('g.py', ACCEPT),
                             kit.argv('kept.py', "import os, sys\nsys.exit(0 if os.path.exists("
                                                 "'kept') else 1)\n"))
                    .replace("spend_ceiling = 1.0", "spend_ceiling = 10.0"))
    # one process imports the engine (the `run` command's modules and the node kinds, which
    # `cli` itself imports only when a command runs) and forks the ten racers (ten processes,
    # each its own `loopproof run`, without ten imports of the engine); each says it is ready
    # and waits for the start signal: the ten calls of `loopproof run` then start within a
    # millisecond of each other
    go = kit.tmp / "go"
    racer = ("import json, os, sys, time\nfrom loopproof.engine import cli\n"
             "import loopproof.engine.commands.run\ncli.register_builtin()\n"
             "go, spec, ledger = sys.argv[1:4]\npids = {}\n"
             "for i in range(10):\n"
             "    pid = os.fork()\n"
             "    if pid == 0:\n"
             "        out = os.open(f'{go}.out.{i}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
             "        err = os.open(f'{go}.err.{i}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
             "        os.dup2(out, 1)\n        os.dup2(err, 2)\n"
             "        open(go + '.ready.' + str(os.getpid()), 'w').close()\n"
             "        while not os.path.exists(go):\n            time.sleep(0.0005)\n"
             "        code = 99  # a traceback: never one of the codes asserted\n"
             "        try:\n"
             "            code = cli.main(['run', spec, '--ledger', ledger, '--json'])\n"
             "        except BaseException:\n"
             "            import traceback\n            traceback.print_exc()\n"
             "        finally:\n            sys.stdout.flush()\n            sys.stderr.flush()\n"
             "            os._exit(code)\n"
             "    pids[pid] = i\n"
             "codes = {}\n"
             "for pid, i in pids.items():\n"
             "    codes[i] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
             "print(json.dumps([codes[i] for i in range(10)]))\n")
    parent = subprocess.Popen([sys.executable, "-c", racer, str(go), str(spec), str(kit.ledger)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while len(list(kit.tmp.glob("go.ready.*"))) < 10:
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.01)
    go.touch()
    out, err = parent.communicate(timeout=120)
    assert parent.returncode == 0, err
    done = [(code, (kit.tmp / f"go.out.{i}").read_text(), (kit.tmp / f"go.err.{i}").read_text())
            for i, code in enumerate(json.loads(out))]
    codes = sorted(code for code, _, _ in done)
    assert codes == [0] + [2] * 9, [(c, e) for c, _, e in done]
    for code, _out, err in done:
        assert "Traceback" not in err
        if code == 2:
            assert len(error_lines(err)) == 1 and "--ledger" in err, err
    assert verify(kit.ledger).status == "verified"
    assert sorted(kit.leftovers()) == ["L.jsonl", "L.jsonl.accepted", "L.jsonl.committed",
                                      "L.jsonl.work"]


def test_a_disk_that_fills_up_is_exit_5_and_the_run_resumes_with_room(kit) -> None:
    """The whole scenario runs in a 4 MiB tmpfs of its own (bubblewrap)."""
    full = Path("/tmp/loopproof-full")
    filler = ("import os\nif not os.path.exists('/tmp/loopproof-full/filled'):\n"
              "    open('/tmp/loopproof-full/filled', 'w').close()\n"
              "    fd = os.open('/tmp/loopproof-full/fill', os.O_WRONLY | os.O_CREAT)\n"
              "    for size in (65536, 4096, 256, 16, 1):\n"
              "        try:\n            while True:\n                os.write(fd, b'x' * size)\n"
              "        except OSError:\n            pass\n"
              "print('o' * 8000)\n")  # a claim record larger than a page: it needs new space
    driver = textwrap.dedent(f"""
        import json, os, subprocess, sys
        run = [sys.executable, "-m", "loopproof.engine.cli"]
        led = "{full}/L.jsonl"
        spec = "{full}/graph.toml"
        open("{full}/w.py", "w").write({filler!r})
        open("{full}/g.py", "w").write("import sys; sys.exit(0)")
        open(spec, "w").write('[graph]\\nspend_budget = 10.0\\n{kit.unsandboxed().strip()}\\n'
                              '[node.a]\\nworker = ["' + sys.executable + '", "{full}/w.py"]\\n'
                              'gate = ["' + sys.executable + '", "{full}/g.py"]\\n'
                              'spend_ceiling = 5.0\\n')
        first = subprocess.run(run + ["run", spec, "--ledger", led], capture_output=True,
                               text=True)
        os.unlink("{full}/fill")
        second = subprocess.run(run + ["resume", "--ledger", led], capture_output=True, text=True)
        print(json.dumps([first.returncode, first.stderr, second.returncode, second.stderr]))
    """)
    p = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--size", str(4 << 20), "--tmpfs",
                        str(full), sys.executable, "-c", driver], capture_output=True, text=True,
                       timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr
    code1, err1, code2, err2 = json.loads(p.stdout)
    assert code1 == 5 and "No space left" in err1, (code1, err1)
    assert "Traceback" not in err1 and "Traceback" not in err1, err1
    assert len(error_lines(err1)) == 1, err1
    assert code2 == 0 and "Traceback" not in err2, err2
