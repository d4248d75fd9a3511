"""Integrity checks: nothing a run depends on changed since it started, and the result may be
released.

Why a unit of its own: a gate's verdict means something only against the files the gate ran
(pinned by hash at run start) and under the policy the run was started with. Both are re-checked
before every attempt and before every verdict; a change is recorded (a `pin_changed` fact record)
and raises `PinChanged`, which stops the run with exit 5 and leaves it resumable once restored.
With a policy, its release conditions decide whether a run whose nodes are all DONE may end DONE.

Interpreters are pinned too (each gate's argv[0], resolved to one file at run start), and an
interpreter is megabytes: a pin is re-hashed only when its file's identity changed (device,
inode, size, modification and change times). A write, a rename over it or a chmod changes the
change time, which no unprivileged process can set back (docs/threat-model.md).

The policy module (engine.policy.pin) is imported only when a run names a policy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loopproof.engine.policy.guards import refuse
from loopproof.engine.record.ledger import Ledger
from loopproof.engine.run.journal import Journal
from loopproof.engine.run.spec import Spec
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from loopproof.engine.system.trees import file_digest
from loopproof.model import policy as mp


class PinChanged(LedgerCorrupt):
    """A file the gate depends on (or the policy) changed since the run started: exit 5."""


def node_pin_files(spec: Spec) -> dict[str, tuple[str, ...]]:
    """Each node's own pinned files (what its gate depends on)."""
    return {name: tuple(str(p) for p in cfg.pinned_files()) for name, cfg in spec.nodes.items()}


def pin_files(spec: Spec) -> dict[str, str]:
    """The hash of every file a gate depends on, in path order: recorded in record 0."""
    pins = {str(p): file_digest(p) for cfg in spec.nodes.values() for p in cfg.pinned_files()}
    return dict(sorted(pins.items()))


def load_policy(spec: Spec, root: Path) -> Any:
    """Pin the policy the graph names; refuse (exit 2) a graph that asks for more than the policy
    allows, or a policy that lies inside the workers' folder."""
    if spec.policy is None:
        return None
    from loopproof.engine.policy.pin import PolicyPin

    pin = PolicyPin.load(spec.policy)
    b = spec.bounds()
    problems = pin.policy.admits(spend_budget=spec.graph.spend_budget,
                                 repair_budget=spec.graph.repair_budget,
                                 attempt_bound=b["W"])
    if refuse("policy.budgets", "; ".join(problems) or None):
        raise BadInput(str(spec.path), "[graph] policy", "; ".join(problems),
                       "lower the graph's budgets, or have the policy's owner raise them")
    pin.assert_outside(root)
    return pin


def recorded_policy(recorded: Any, ledger_path: Path) -> Any:
    """The policy pin record 0 names, re-pinned from the record (checked on resume)."""
    if recorded is None:
        return None
    from loopproof.engine.policy.pin import PolicyPin
    if not isinstance(recorded, dict) or "path" not in recorded:
        raise LedgerCorrupt(f"{ledger_path}: record 0: malformed policy record; fix: "
                            f"restore the ledger from a trusted copy")
    return PolicyPin(Path(recorded["path"]), recorded)


def signing_keys(pin: Any) -> tuple[Path | None, Path | None]:
    """The policy's (private, public) signing key paths; (None, None) without a policy, without
    keys, or when the policy file no longer loads (the policy check reports that)."""
    if pin is None:
        return None, None
    policy = getattr(pin, "policy", None)
    if policy is None:
        from loopproof.engine.policy.pin import parse_policy
        try:
            policy = parse_policy(pin.path.read_bytes(), pin.path)
        except (OSError, BadInput):
            return None, None
    return policy.key_paths()


def sign(ledger: Ledger, pin: Any, path: Path | None = None) -> None:
    """Sign the head the engine wrote when the policy names a signing key
    (engine.record.signing.sign_written: never a head read back from the path)."""
    private, _ = signing_keys(pin)
    if private is not None:
        from loopproof.engine.record.signing import sign_written
        sign_written(ledger, private, path)


class Integrity:
    """The run's pins (path -> sha256 at run start) and its policy pin (or None).

    `digest` reads a file again only when its (device, inode, size, mtime_ns, ctime_ns) changed:
    restoring mtime with `utime` does not hide a rewrite, since the kernel sets ctime on every
    change and no call sets it back. `node_pins` names each node's own files: an attempt checks
    those, a release check checks them all."""

    def __init__(self, journal: Journal, pins: dict[str, str], policy: Any,
                 policy_file: Path | None,
                 node_pins: dict[str, tuple[str, ...]] | None = None) -> None:
        self.journal, self.pins, self.policy, self.policy_file = journal, pins, policy, policy_file
        self.node_pins = node_pins
        self._seen: dict[str, tuple[tuple[int, ...], str]] = {}  # path -> (identity, digest)

    def digest(self, path: str) -> str:
        """The file's sha256, re-read only when its identity changed since the last read."""
        try:
            st = os.stat(path)
        except OSError:
            return file_digest(Path(path))  # "missing" / "unreadable:..."
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        seen = self._seen.get(path)
        if seen is not None and seen[0] == key:
            return seen[1]
        found = file_digest(Path(path))
        self._seen[path] = (key, found)
        return found

    def check_pins(self, node: str | None = None) -> None:
        """Check the node's own pinned files (every pinned file when `node` is None or its files
        are not known: a release check, a resume); a file whose identity changed is re-hashed,
        a changed hash is recorded and stops the run."""
        paths: Any = self.pins
        if node is not None and self.node_pins is not None and node in self.node_pins:
            paths = [p for p in self.node_pins[node] if p in self.pins]
        for path in paths:
            expected = self.pins[path]
            found = self.digest(path)
            # G6's rule for a stage (model/policy.py): it runs only under what was pinned
            held = mp.Stage(node or "release").why_not(mp.PolicyState(current=found,
                                                                      pinned=expected))
            if refuse("run.gate_files", held):
                self.journal.note({"type": "pin_changed", "node": node, "file": path,
                                   "expected": expected, "found": found})
                raise PinChanged(f"{path}: a file a gate depends on changed since the run "
                                 f"started (sha256 {expected[:12]}... -> {found[:12]}...); "
                                 f"fix: restore it, then resume")

    def check_policy(self) -> None:
        if self.policy is None:
            return
        try:
            self.policy.check()
        except LedgerCorrupt as exc:
            self.journal.note({"type": "pin_changed", "file": str(self.policy_file),
                               "what": "policy", "error": str(exc)})
            raise PinChanged(str(exc)) from exc

    def release_unmet(self, approved_by: str | None) -> list[str]:
        """The pinned policy's release conditions that do not hold now, every node being DONE
        ([] without a policy). A changed pin or policy raises PinChanged (exit 5) first, so
        `pins_unchanged` holds here. `ledger_verified`: the ledger, synced, is the chain the
        engine wrote (re-read and verified; otherwise LedgerLost, exit 5).
        `signed`: the policy names a private key that loads (the head is signed with it when
        the run ends). `approved`: `approved_by` names the policy's approver."""
        if self.policy is None:
            return []
        self.check_pins()
        self.check_policy()
        from loopproof.engine.policy.pin import parse_policy
        from loopproof.engine.record.signing import _load_private
        policy = self.policy.policy or parse_policy(self.policy.path.read_bytes(),
                                                    self.policy.path)
        self.journal.sync()
        self.journal.ledger.verify_owned()  # LedgerLost (exit 5) unless it is the chain written
        priv, _ = policy.key_paths()
        signed = priv is not None
        if signed:
            try:
                _load_private(priv)
            except BadInput:
                signed = False
        return policy.release_unmet(outcome="DONE",
                                    ledger_status="verified",
                                    pins_unchanged=True, signed=signed,
                                    approved_by=approved_by)
