"""loopproof.engine.policy.pin: every bad policy is refused with file/field/fix; the pin catches every change
and names the field; resume compares against the digests recorded at start."""

from __future__ import annotations

import pytest

from loopproof.engine.policy.pin import FIELDS, PolicyChanged, PolicyPin, load_policy
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from tests.support.paths import REPO

GOOD = """\
# the human policy
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
attempts = 20

[release]
conditions = ["all_done", "ledger_verified"]
"""


@pytest.fixture
def policy_dir(tmp_path):
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "check_it.py").write_text("import sys; sys.exit(0)\n")
    (tmp_path / "gates" / "cases.json").write_text("[1, 2, 3]\n")
    (tmp_path / "policy.toml").write_text(GOOD)
    return tmp_path


def test_good_policy_loads_with_defaults(policy_dir):
    p = load_policy(policy_dir / "policy.toml")
    assert p["policy.version"] == 1 and p["budget.spend"] == 60.0 and p["budget.repairs"] == 1
    assert p["release.conditions"] == ["all_done", "ledger_verified"]
    assert set(p.fields) == set(p.values) and len(p.digest) == 64
    assert p.pinned_paths()["gate.files"] == [policy_dir / "gates" / "check_it.py"]


def test_digest_ignores_layout_but_not_content(policy_dir):
    a = load_policy(policy_dir / "policy.toml")
    (policy_dir / "policy.toml").write_text("# reformatted\n" + GOOD.replace("spend = 60.0",
                                                                            "spend   =   60.0"))
    b = load_policy(policy_dir / "policy.toml")
    assert a.digest == b.digest
    (policy_dir / "policy.toml").write_text(GOOD.replace("spend = 60.0", "spend = 61.0"))
    c = load_policy(policy_dir / "policy.toml")
    assert c.digest != a.digest
    assert [k for k in a.fields if a.fields[k] != c.fields[k]] == ["budget.spend"]


BAD = {
    "missing goals": (lambda s: s.replace('goals = ["every node DONE with a PASS verdict"]\n', ""),
                      "policy.goals: is missing"),
    "empty goals": (lambda s: s.replace('["every node DONE with a PASS verdict"]', "[]"),
                    "policy.goals: must not be empty"),
    "goal not string": (lambda s: s.replace('["every node DONE with a PASS verdict"]', "[3]"),
                        "policy.goals: must be a list of non-empty strings"),
    "missing scope": (lambda s: s.replace('scope = ["."]\n', ""), "policy.scope: is missing"),
    "no gate files": (lambda s: s.replace('files = ["gates/check_it.py"]', "files = []"),
                      "gate.files: must not be empty"),
    "gate file missing": (lambda s: s.replace("check_it.py", "nope.py"),
                          "gate.files: names"),
    "suite file missing": (lambda s: s.replace("cases.json", "gone.json"), "suite.files: names"),
    "negative spend": (lambda s: s.replace("spend = 60.0", "spend = -1.0"),
                       "budget.spend: must be >= 0"),
    "spend is text": (lambda s: s.replace("spend = 60.0", 'spend = "60"'),
                      "budget.spend: must be a number"),
    "nan spend": (lambda s: s.replace("spend = 60.0", "spend = nan"),
                  "budget.spend: must be a finite number"),
    "repairs float": (lambda s: s.replace("repairs = 1", "repairs = 1.5"),
                      "budget.repairs: must be an integer"),
    "repairs bool": (lambda s: s.replace("repairs = 1", "repairs = true"),
                     "budget.repairs: must be an integer"),
    "attempts zero": (lambda s: s.replace("attempts = 20", "attempts = 0"),
                      "budget.attempts: must be >= 1"),
    "missing budget": (lambda s: s.replace("spend = 60.0\n", ""), "budget.spend: is missing"),
    "unknown condition": (lambda s: s.replace('"ledger_verified"]', '"vibes"]'),
                          "release.conditions: has unknown condition(s) ['vibes']"),
    "unknown table": (lambda s: s + "\n[extras]\nx = 1\n", "[extras]: is not a table of the policy file"),
    "unknown key": (lambda s: s.replace("repairs = 1", "repairz = 1"),
                    "budget.repairz: is not a field of [budget]; fix: did you mean 'repairs'?"),
    "bad toml": (lambda s: s + "\n[budget\n", "policy: is not valid TOML"),
    "version 2": (lambda s: s.replace("[policy]\n", "[policy]\nversion = 2\n"),
                  "policy.version: must be 1"),
    "one key only": (lambda s: s + '\n[signing]\nprivate_key = "k.pem"\n',
                     "signing: names only one of private_key and public_key"),
    "signed without key": (lambda s: s.replace('"ledger_verified"]', '"ledger_verified", "signed"]'),
                           "release.conditions: asks for 'signed'"),
    "approved without approver": (
        lambda s: s.replace('"ledger_verified"]', '"ledger_verified", "approved"]'),
        "release.conditions: asks for 'approved'"),
    "table not table": (lambda s: 'budget = 3\n' + s.replace("[budget]\nspend = 60.0\nrepairs = 1\nattempts = 20\n", ""),
                        "[budget]: must be a table"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_policy_names_file_field_and_fix(policy_dir, case):
    edit, message = BAD[case]
    path = policy_dir / "policy.toml"
    path.write_text(edit(GOOD))
    before = sorted(p.name for p in policy_dir.rglob("*"))
    with pytest.raises(BadInput) as info:
        PolicyPin.load(path)
    text = str(info.value)
    assert message in text and str(path) in text and "fix:" in text
    assert "\n" not in text
    assert sorted(p.name for p in policy_dir.rglob("*")) == before  # nothing written


def test_missing_policy_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="file not found"):
        PolicyPin.load(tmp_path / "none.toml")
    with pytest.raises(BadInput, match="is a directory"):
        load_policy(tmp_path)


def test_every_field_is_documented():
    for f in FIELDS:
        assert f.doc and f.example and f.name.count(".") == 1


# ---- the pin -------------------------------------------------------------------------------------

def test_unchanged_policy_checks_clean(policy_dir):
    pin = PolicyPin.load(policy_dir / "policy.toml")
    pin.check()
    pin.check()
    rec = pin.record()
    assert rec["digest"] == load_policy(policy_dir / "policy.toml").digest
    assert set(rec["files"]) == {"gate.files", "suite.files"}


@pytest.mark.parametrize("old, new, field", [
    ("spend = 60.0", "spend = 600.0", "budget.spend"),
    ("repairs = 1", "repairs = 9", "budget.repairs"),
    ('scope = ["."]', 'scope = [".", "/etc"]', "policy.scope"),
    ("every node DONE", "most nodes DONE", "policy.goals"),
    ('"all_done", ', "", "release.conditions"),
    ("attempts = 20\n", "", "budget.attempts"),
])
def test_changed_field_is_named(policy_dir, old, new, field):
    path = policy_dir / "policy.toml"
    pin = PolicyPin.load(path)
    path.write_text(GOOD.replace(old, new))
    with pytest.raises(PolicyChanged, match=rf"policy field\(s\) {field} changed"):
        pin.check()
    assert issubclass(PolicyChanged, LedgerCorrupt)


def test_comment_only_change_still_stops_the_run(policy_dir):
    path = policy_dir / "policy.toml"
    pin = PolicyPin.load(path)
    path.write_text(GOOD + "# harmless?\n")
    with pytest.raises(PolicyChanged, match="comments or layout only"):
        pin.check()


def test_policy_that_no_longer_loads_stops_the_run(policy_dir):
    path = policy_dir / "policy.toml"
    pin = PolicyPin.load(path)
    path.write_text("[budget\n")
    with pytest.raises(PolicyChanged, match="no longer loads"):
        pin.check()
    path.unlink()
    with pytest.raises(PolicyChanged, match="cannot be read"):
        pin.check()


@pytest.mark.parametrize("name, field", [("check_it.py", "gate.files"),
                                         ("cases.json", "suite.files")])
def test_pinned_file_edit_or_removal_names_the_field(policy_dir, name, field):
    pin = PolicyPin.load(policy_dir / "policy.toml")
    target = policy_dir / "gates" / name
    target.write_text(target.read_text() + " ")
    with pytest.raises(PolicyChanged, match=rf"{field}: pinned file .*{name} changed"):
        pin.check()
    target.unlink()
    with pytest.raises(PolicyChanged, match=rf"{field}: pinned file .*{name} is gone"):
        pin.check()


def test_resume_uses_the_digests_recorded_at_start(policy_dir):
    path = policy_dir / "policy.toml"
    recorded = PolicyPin.load(path).record()
    PolicyPin.resume(path, recorded).check()  # unchanged: fine
    path.write_text(GOOD.replace("spend = 60.0", "spend = 1000.0"))  # changed while down
    with pytest.raises(PolicyChanged, match="budget.spend"):
        PolicyPin.resume(path, recorded)
    with pytest.raises(LedgerCorrupt, match="lacks 'files'"):
        PolicyPin.resume(path, {k: v for k, v in recorded.items() if k != "files"})


def test_admits_and_release_conditions(policy_dir):
    p = load_policy(policy_dir / "policy.toml")
    assert p.admits(spend_budget=60, repair_budget=1, attempt_bound=20) == []
    problems = p.admits(spend_budget=61, repair_budget=2, attempt_bound=21)
    assert len(problems) == 3 and "budget.spend" in problems[0]
    assert p.release_unmet(outcome="DONE", ledger_status="verified", pins_unchanged=True,
                           signed=False) == []
    assert p.release_unmet(outcome="FAILED", ledger_status="torn-tail", pins_unchanged=True,
                           signed=False) == ["all_done", "ledger_verified"]


def test_policy_inside_a_worker_folder_is_refused(policy_dir):
    pin = PolicyPin.load(policy_dir / "policy.toml")
    pin.assert_outside(policy_dir.parent / "elsewhere")
    with pytest.raises(BadInput, match="lies inside the worker's folder"):
        pin.assert_outside(policy_dir / "gates")


def test_docs_list_every_field():

    doc = (REPO / "docs" / "ledger.md").read_text()
    for f in FIELDS:
        assert f"`{f.name}`" in doc, f"docs/ledger.md does not document {f.name}"
