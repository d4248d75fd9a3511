"""loopproof.engine.system.process: process-group kill, environment filtering, ceilings, output capture."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from loopproof.engine.system.process import ProcessError, run_command, safe_environment

PY = sys.executable


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a zombie has stopped running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _spawner(tmp_path: Path) -> list[str]:
    """A child that starts a sleeping grandchild, writes its pid, then waits (a shell: it starts
    in milliseconds even on a loaded machine)."""
    return ["sh", "-c", "sleep 60 & echo $! > grandchild.pid; printf spawned; wait"]


def _pid_file_written(tmp_path: Path) -> bool:
    f = tmp_path / "grandchild.pid"
    return f.exists() and f.read_text().strip().isdigit()


def _wait_gone(pid: int, seconds: float = 3.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_exit_code_and_output_captured(tmp_path):
    r = run_command([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                    tmp_path, 10)
    assert r.returncode == 3 and not r.timed_out and r.killed is None
    assert r.stdout.strip() == b"out" and r.stderr.strip() == b"err"
    assert r.argv[0] == PY and r.seconds > 0


def test_stdin_is_passed(tmp_path):
    r = run_command([PY, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"],
                    tmp_path, 10, stdin=b"hello")
    assert r.stdout == b"HELLO" and r.returncode == 0


def test_timeout_kills_grandchildren(tmp_path):
    t0 = time.monotonic()
    r = run_command(_spawner(tmp_path), tmp_path, 1.5)
    assert r.timed_out and r.killed == "timeout" and r.returncode is None
    assert time.monotonic() - t0 < 30
    assert r.stdout == b"spawned" and _pid_file_written(tmp_path)
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert _wait_gone(grandchild), f"grandchild {grandchild} survived the group kill"


def test_leftover_grandchild_killed_after_normal_exit(tmp_path):
    argv = ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $! > grandchild.pid"]
    r = run_command(argv, tmp_path, 30)
    assert r.returncode == 0 and r.killed is None
    assert _wait_gone(int((tmp_path / "grandchild.pid").read_text()))


def test_on_tick_stops_the_command(tmp_path):
    seen: list[float] = []

    def tick(elapsed: float) -> bool:
        seen.append(elapsed)
        return elapsed < 0.3 or not _pid_file_written(tmp_path)

    r = run_command(_spawner(tmp_path), tmp_path, 60, on_tick=tick, tick_s=0.02)
    assert r.killed == "ceiling" and not r.timed_out and r.returncode is None
    assert 0.3 <= r.seconds < 30 and seen == sorted(seen) and len(seen) > 3
    assert _wait_gone(int((tmp_path / "grandchild.pid").read_text()))


def test_environment_is_filtered(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("LOOPPROOF_SIGNING_KEY", "/keys/k.pem")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    r = run_command([PY, "-c", code], tmp_path, 10)
    env = json.loads(r.stdout)
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert not any(k.startswith("LOOPPROOF_") for k in env)
    assert env["PYTHONHASHSEED"] == "0" and env["HOME"] == str(tmp_path)
    assert b"secret" not in r.stdout


def test_safe_environment_extra_on_top(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    env = safe_environment({"NODE": "build"})
    assert env["NODE"] == "build" and "AWS_SECRET_ACCESS_KEY" not in env
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT", "PYTHONHASHSEED",
                        "PYTHONDONTWRITEBYTECODE", "TMPDIR", "HOME", "NODE"}


def test_output_is_capped(tmp_path):
    r = run_command([PY, "-c", "import sys; sys.stdout.write('x' * 100000)"], tmp_path, 10,
                    max_output=1000)
    assert r.stdout == b"x" * 1000 and r.output_truncated and r.returncode == 0


def test_missing_executable_is_a_process_error(tmp_path):
    with pytest.raises(ProcessError, match="no-such-program"):
        run_command(["no-such-program-xyz"], tmp_path, 5)
    assert issubclass(ProcessError, OSError)


def test_bad_cwd_is_a_process_error(tmp_path):
    with pytest.raises(ProcessError, match="working directory"):
        run_command([PY, "-c", "pass"], tmp_path / "missing", 5)


def test_fast_command_returns_promptly(tmp_path):
    r = run_command(["true"], tmp_path, 120, tick_s=60.0)
    assert r.returncode == 0 and r.seconds < 30  # exit is noticed at once, not at the next tick

