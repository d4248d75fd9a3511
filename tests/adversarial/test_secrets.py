"""Family: secrets. The engine's environment holds API keys; the policy names a signing key.
A hostile worker reads its parent's environment (/proc/$PPID/environ), every environment it
can find under /proc, and the key file, and prints them: its output is recorded in the ledger.
No secret may reach the ledger, under the sandbox or without one (`sandbox = "none"`: the
worker can read them, so the engine redacts them from everything it records).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from loopproof.engine.record.signing import generate_keypair
from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load

# every environment under /proc it may read, its parent's last (the output's tail is recorded)
DUMP = ("for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f | grep -E 'KEY|TOKEN'; done; "
        "tr '\\0' '\\n' < /proc/$PPID/environ; echo ok > out.txt")


def write_graph(tmp_path: Path, worker: str, gate: str, backend: str, extra: str = "") -> Path:
    sandbox = "" if backend == "default" else f'sandbox = "{backend}"\n'
    path = tmp_path / "graph.toml"
    path.write_text(f"[graph]\nspend_budget = 60.0\n{sandbox}{extra}[node.a]\n"
                    f"worker = {json.dumps(['sh', '-c', worker])}\n"
                    f"gate = {json.dumps(['sh', '-c', gate])}\n"
                    "spend_ceiling = 20.0\ntimeout_s = 20\ngate_timeout_s = 20\n")
    return path


ROOT = Path(__file__).resolve().parents[2]


def run(path: Path, ledger: Path) -> int:
    runner = Runner.start(load(path), ledger)
    try:
        return runner.run()
    finally:
        runner.close()


@pytest.mark.parametrize("backend", ["default", "none"])
def test_the_engines_environment_never_reaches_the_ledger(tmp_path: Path, backend: str) -> None:
    key = "sk-test-" + secrets.token_hex(16)
    token = secrets.token_hex(20)
    ledger = tmp_path / "L.jsonl"
    # the gate speaks too (its words are the verdict's detail)
    spec = write_graph(tmp_path, DUMP, "tr '\\0' '\\n' < /proc/$PPID/environ; env; test -f out.txt",
                       backend)
    # the engine as an operator starts it: the keys are in its environment from the start
    env = dict(os.environ, OPENAI_API_KEY=key, LOOPPROOF_DEPLOY_TOKEN=token, PYTHONPATH=str(ROOT))
    code = subprocess.run([sys.executable, "-c", "import sys; from loopproof.engine import cli; "
                           "sys.exit(cli.main(sys.argv[1:]))", "run", str(spec), "--ledger",
                           str(ledger)], env=env, cwd=tmp_path, capture_output=True).returncode
    data = ledger.read_bytes()
    assert code == 0
    assert b"OPENAI_API_KEY" in data or backend == "default"  # without a sandbox: it was read
    assert key.encode() not in data and token.encode() not in data


def test_the_signing_key_is_invisible_to_the_worker(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    priv, pub = keys / "run.pem", keys / "run.pub"
    generate_keypair(priv, pub)
    (tmp_path / "check.sh").write_text("test -f out.txt\n")
    (tmp_path / "policy.toml").write_text(
        '[policy]\ngoals = ["done"]\nscope = ["."]\n[gate]\nfiles = ["check.sh"]\n'
        '[budget]\nspend = 60.0\nrepairs = 0\n'
        f'[signing]\nprivate_key = "{priv}"\npublic_key = "{pub}"\n')
    ledger = tmp_path / "L.jsonl"
    worker = f"cat {priv}; ls {keys}; echo ok > out.txt"
    code = run(write_graph(tmp_path, worker, "test -f out.txt", "default",
                           'policy = "policy.toml"\n'), ledger)
    assert code == 0
    secret = b"".join(priv.read_bytes().splitlines()[1:-1])  # the PEM body
    assert secret[:40] not in ledger.read_bytes().replace(b"\\n", b"")
    assert b"PRIVATE KEY" not in ledger.read_bytes()
