"""Red team: kernel keyrings, a secret store and a shared state no mount can hide.

The engine's user may keep tokens in its kernel keyrings (`keyctl padd user token @u`): the
per-user keyring is shared by every process of that uid, and a worker in a mount, PID and
network namespace of its own is still that uid. A key a worker adds there outlives its attempt
(a channel to later attempts, and to anything that reads keys). Every command runs under a
seccomp filter that refuses the keyring calls: the worker reads no payload and leaves no key.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import secrets
import sys
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load

PY = sys.executable
# add_key, keyctl by machine (the worker uses the same table through argv)
CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}
USER_KEYRING, KEYCTL_SEARCH, KEYCTL_READ, KEYCTL_UNLINK = -4, 10, 11, 9

READ = """
import ctypes, os, sys
add_key, keyctl = int(sys.argv[1]), int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
kid = libc.syscall(keyctl, 10, -4, b"user", sys.argv[3].encode(), 0)
buf = ctypes.create_string_buffer(128)
n = libc.syscall(keyctl, 11, kid, buf, 128)
open("answer.txt", "wb").write(buf.raw[:n] if n > 0 else b"-")
libc.syscall(add_key, b"user", sys.argv[4].encode(), b"left behind", 11, -4)
"""


def host_keyctl():
    if platform.machine() not in CALLS:
        pytest.fail(f"no keyring syscall numbers for {platform.machine()}; add them to CALLS")
    add_key, keyctl = CALLS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    return libc, add_key, keyctl


def test_a_worker_reads_no_key_and_leaves_none(tmp_path: Path) -> None:
    libc, add_key, keyctl = host_keyctl()
    name, left = f"lp-redteam-{secrets.token_hex(6)}", f"lp-redteam-{secrets.token_hex(6)}"
    payload = secrets.token_hex(12).encode()
    kid = libc.syscall(add_key, b"user", name.encode(), payload, len(payload), USER_KEYRING)
    assert kid > 0, os.strerror(ctypes.get_errno())  # the operator's token, in its keyring
    try:
        (tmp_path / "read.py").write_text(READ)
        (tmp_path / "expected.txt").write_bytes(payload)
        path = tmp_path / "graph.toml"
        worker = [PY, "read.py", str(add_key), str(keyctl), name, left]
        gate = ["sh", "-c", f"test \"$(cat answer.txt)\" = {payload.decode()}"]
        path.write_text("[graph]\nspend_budget = 60.0\n[node.a]\n"
                        f"worker = {json.dumps(worker)}\ngate = {json.dumps(gate)}\n"
                        "spend_ceiling = 20.0\ntimeout_s = 20\ngate_timeout_s = 20\n")
        runner = Runner.start(load(path), tmp_path / "L.jsonl")
        try:
            code = runner.run()
        finally:
            runner.close()
        keys = Path("/proc/keys").read_text()
    finally:
        libc.syscall(keyctl, KEYCTL_UNLINK, kid, USER_KEYRING)
        leftover = libc.syscall(keyctl, KEYCTL_SEARCH, USER_KEYRING, b"user", left.encode(), 0)
        if leftover > 0:
            libc.syscall(keyctl, KEYCTL_UNLINK, leftover, USER_KEYRING)
    assert (tmp_path / "L.jsonl.work" / "a" / "answer.txt").read_bytes() == b"-"
    assert code == 3 and left not in keys

