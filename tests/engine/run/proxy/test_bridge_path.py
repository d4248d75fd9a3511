"""The worker's argv names the proxy bridge by its real path. The sandbox binds the files argv
names at their real paths, so a path through a link (the checkout's loopproof/engine -> engine/)
does not resolve inside it when the checkout lies in a folder the sandbox masks (/tmp, the
engine user's home): every proxied worker then failed to start ("can't open file"), which only a
fresh clone in /tmp showed."""

from __future__ import annotations

import os

from loopproof.engine.run.proxy import access


def test_the_bridge_in_a_wrapped_argv_is_named_by_its_real_path(tmp_path):
    argv = access.Access(env={}, socket=tmp_path / "llm.sock").wrap(["worker"])
    bridge = argv[3]
    assert bridge.endswith("bridge.py") and os.path.isfile(bridge)
    assert os.path.realpath(bridge) == bridge
