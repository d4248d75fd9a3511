"""The engine's policy pin equals G6's model (model/policy.py), as tests/engine/run/test_engine_stateful.py
holds the runner to the run model.

A Hypothesis state machine pins a real policy (real files: the policy TOML, a gate file, a suite
file) with `PolicyPin.load`, then edits them in every way the pin covers (a field, the file's
bytes only, a policy that no longer loads, a gate file changed or gone, a suite file changed,
each put back to its pinned bytes later, or all of them at once), lets a worker write its own workspace, runs stages
(`pin.check()`) and resumes a stopped run from the recorded digests (`PolicyPin.resume`). The
model runs beside it on its own names for what the files hold, and after every step:

- a stage runs in the engine exactly when the model's Stage may run, and the run stops exactly
  when the model's PolicyCheck does;
- a stopped run resumes in the engine exactly when the model's Resume may;
- the engine's digest of what it sees equals its pin exactly when the model's current policy is
  its pinned one (the engine's digest covers every part the model's names do, and no other);
- G6 on the model: every stage ran under the pinned policy (`pinned_stages`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from loopproof.engine.policy.pin import PolicyChanged, PolicyPin
from loopproof.model import policy as mp

GOOD = """\
[policy]
goals = ["every node DONE with a PASS verdict"]
scope = ["."]

[gate]
files = ["gates/check_it.py"]

[suite]
files = ["gates/cases.json"]

[budget]
spend = 60.0
repairs = 1
"""
# What each part may hold; index 0 is what the run pins, None removes the file.
VARIANTS: dict[str, tuple[str | None, ...]] = {
    "policy.toml": (GOOD, "# a comment only\n" + GOOD, GOOD.replace("60.0", "61.0"),
                    GOOD + "[budget\n"),
    "gates/check_it.py": ("import sys; sys.exit(0)\n", "import sys; sys.exit(1)\n", None),
    "gates/cases.json": ("[1, 2, 3]\n", "[1, 2]\n"),
}


SEEN: Counter[str] = Counter()  # outcomes of stage and resume over a run of the machine


def event_(name: str) -> str:
    event(name)  # Hypothesis statistics: pytest --hypothesis-show-statistics
    return name


class PinMatchesModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="loopproof-g6-"))
        (self.root / "gates").mkdir()
        (self.root / "work").mkdir()  # the worker's own workspace
        self.held = dict.fromkeys(VARIANTS, 0)
        for part in VARIANTS:
            self.write(part, 0)
        self.pin = PolicyPin.load(self.root / "policy.toml")
        self.recorded = self.pin.record()
        self.model = mp.Pin().apply(mp.PolicyState(current=self.name()))

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def name(self) -> str:
        """The model's digest: the test's own name for what the files hold."""
        return ",".join(f"{part}={i}" for part, i in sorted(self.held.items()))

    def write(self, part: str, i: int) -> None:
        path, text = self.root / part, VARIANTS[part][i]
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)
        self.held[part] = i

    @rule(data=st.data(), part=st.sampled_from(sorted(VARIANTS)))
    def edit(self, data: st.DataObject, part: str) -> None:
        """The environment changes a file, or puts back its pinned bytes (variant 0)."""
        self.write(part, data.draw(st.integers(0, len(VARIANTS[part]) - 1)))
        self.model = mp.Edit(self.name()).apply(self.model)

    @rule()
    def restore(self) -> None:
        """The operator puts the pinned version back (what PolicyChanged's fix says)."""
        for part in VARIANTS:
            self.write(part, 0)
        self.model = mp.Edit(self.name()).apply(self.model)

    @rule()
    def worker_writes(self) -> None:
        (self.root / "work" / "out.txt").write_text("a worker's output\n")
        self.model = mp.WorkerWrite().apply(self.model)

    @rule()
    def stage(self) -> None:
        allowed = mp.Stage().why_not(self.model)
        try:
            self.pin.check()
            ran, said = True, ""
        except PolicyChanged as exc:
            ran, said = False, str(exc)
        assert ran == (allowed is None), f"engine ran={ran} ({said}); model: {allowed}"
        SEEN[event_(f"stage {'runs' if ran else 'refused'}")] += 1
        if ran:
            self.model = mp.Stage().apply(self.model)
        elif mp.PolicyCheck().why_not(self.model) is None:
            self.model = mp.PolicyCheck().apply(self.model)
        same = self.pin.state.current == self.pin.state.pinned
        assert same == (self.model.current == self.model.pinned), (self.name(), said)
        assert self.pin.state.stopped == self.model.stopped

    @precondition(lambda self: self.model.stopped)
    @rule()
    def resume(self) -> None:
        allowed = mp.Resume().why_not(self.model)
        try:
            pin = PolicyPin.resume(self.root / "policy.toml", self.recorded)
            resumed, said = True, ""
        except PolicyChanged as exc:
            resumed, said = False, str(exc)
        assert resumed == (allowed is None), f"engine resumed={resumed} ({said}); model: {allowed}"
        SEEN[event_(f"resume {'runs' if resumed else 'refused'}")] += 1
        if resumed:
            self.pin = pin
            self.model = mp.Resume().apply(self.model)

    @invariant()
    def stages_ran_under_the_pin(self) -> None:
        if hasattr(self, "model"):
            assert mp.pinned_stages(self.model) is None, mp.pinned_stages(self.model)
            assert self.pin.record() == self.recorded  # the pin never follows a change


def test_the_pin_equals_the_model_and_every_outcome_is_exercised():
    """The machine, run as a test (settings() inherits the loaded profile: the ci profile's
    derandomize and deadline stay); then each of the four outcomes must have happened, or the
    test proves less than it says."""
    SEEN.clear()
    run_state_machine_as_test(PinMatchesModel,
                              settings=settings(stateful_step_count=25))  # ci: 50 (was 100); fuzz: 300
    assert {"stage runs", "stage refused", "resume runs", "resume refused"} <= set(SEEN), SEEN
