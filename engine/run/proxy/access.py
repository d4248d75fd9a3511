"""Model access for one attempt: the proxy with its socket and token, and what the worker gets.

Why per attempt: the token the worker gets as OPENAI_API_KEY (and as ANTHROPIC_API_KEY: one
token, whichever API the agent speaks) is made for this attempt and dies with its proxy, so it
is worthless after the attempt, in a later attempt and outside the run. The upstream key is
taken out of the engine's environment (engine/system/secret_env.py) and lives only in the
proxy's memory; the worker's argv is wrapped by `bridge.py`, which relays a loopback port inside
the worker's sandbox to the socket and sets OPENAI_BASE_URL and ANTHROPIC_BASE_URL.
"""

from __future__ import annotations

import glob
import hashlib
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.run.proxy.call import Account
from loopproof.engine.run.proxy.config import LlmConfig
from loopproof.engine.run.proxy.server import Proxy
from loopproof.engine.run.proxy.store import BodyStore, calls_root
from loopproof.engine.system import secret_env

# by its real path: the sandbox binds what argv names at its real path, so a path through a link
# (loopproof/engine -> engine/ in a checkout) would not resolve inside it when the checkout lies
# in a folder the sandbox masks (/tmp, the engine user's home)
BRIDGE = Path(os.path.realpath(Path(__file__).with_name("bridge.py")))


@dataclass(frozen=True)
class Access:
    """What the attempt's worker is given: its environment, the socket to bind into its
    sandbox, and the wrapper of its argv."""

    env: dict[str, str]
    socket: Path
    # why the worker must stop now (a refusal under on_refusal = "end-attempt", once its calls
    # in flight are settled), else None: polled while the worker runs
    stop: Callable[[], str | None] = lambda: None

    def wrap(self, argv: Sequence[str]) -> tuple[str, ...]:
        return (sys.executable, "-I", "-S", str(BRIDGE), "--socket", str(self.socket), "--",
                *argv)


def socket_prefix(ledger: Path) -> str:
    """The temp-folder prefix of a run's proxy sockets: only one engine holds a ledger at a
    time, so a folder with this prefix that exists when an attempt starts is a killed one's."""
    return f"lp-{hashlib.sha256(str(ledger).encode()).hexdigest()[:10]}-"


@contextmanager
def model_access(cfg: LlmConfig, account: Account, *, ledger: Path,
                 where: dict[str, Any]) -> Iterator[Access]:
    """Start the attempt's proxy; stop it (every call settled) when the block ends."""
    key = secret_env.take(cfg.api_key_env) if cfg.api_key_env else None
    token = "lp-" + secrets.token_urlsafe(32)
    prefix = socket_prefix(ledger)
    for stale in glob.glob(glob.escape(str(Path(tempfile.gettempdir()) / prefix)) + "*"):
        shutil.rmtree(stale, ignore_errors=True)  # left by a killed engine (one per ledger)
    folder = Path(tempfile.mkdtemp(prefix=prefix))  # short: a socket path has ~100 bytes
    sock = folder / "llm.sock"
    proxy = Proxy(cfg, account, socket_path=sock, token=token, key=key,
                  store=BodyStore(calls_root(ledger), [key, token]), where=where)
    proxy.start()
    try:
        yield Access({"OPENAI_API_KEY": token, "ANTHROPIC_API_KEY": token}, sock,
                     proxy.stop_reason)
    finally:
        proxy.stop()
        shutil.rmtree(folder, ignore_errors=True)
