"""The `prover: coq` obligations can fail: a theorem that rests on an assumption, a source that
admits a lemma, a missing coqc and a model with a planted fault are never reported proved."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loopproof.proofs import coq
from loopproof.proofs.obligations import OBLIGATIONS, discharge

BY_ID = {ob.id: ob for ob in OBLIGATIONS}
COQ = [ob for ob in OBLIGATIONS if ob.prover == "coq"]


def test_the_coq_obligations_are_listed_beside_the_z3_ones() -> None:
    assert {ob.id for ob in COQ} >= {"G1-coq-W-bound", "G1-coq-W-tight", "G1-coq-structural",
                                     "G3-coq-no-overspend"}
    assert {ob.guarantee for ob in COQ if ob.broken} == {"G1", "G3"}
    assert all(ob.prover == "z3" for ob in OBLIGATIONS if ob not in COQ)
    built = coq.build()
    assert all(built.closed(t) for t in coq.THEOREMS), built.assumptions


def test_a_theorem_resting_on_an_axiom_is_not_proved(monkeypatch) -> None:
    real = coq.build()
    fake = coq.Build(real.directory, {**real.assumptions,
                                      "loopproof_W_bound": "Axioms:\nW_le : forall g, False"}, 0)
    monkeypatch.setattr(coq, "build", lambda: fake)
    r = discharge(BY_ID["G1-coq-W-bound"])
    assert r.result == "unknown" and "W_le" in r.error


def test_a_missing_coqc_is_reported_with_its_fix(monkeypatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: None)
    r = discharge(BY_ID["G3-coq-no-overspend"])
    assert r.result == "unknown" and "make coq" in r.error


@pytest.mark.parametrize("text, found", [
    ("Lemma x : True. Admitted.", ["Admitted"]),
    ("Proof. admit. Qed.", ["admit"]),
    ("Axiom funext : True.", ["Axiom"]),
    ("(* no Admitted here *) Lemma x : True. Proof. exact I. Qed.", []),
])
def test_forbidden_words_outside_comments_are_found(text: str, found: list[str]) -> None:
    assert coq.forbidden(text) == found


def test_a_fault_planted_in_the_coq_model_breaks_the_w_bound_proof(monkeypatch, tmp_path) -> None:
    # the operator's Cancel allowed on a DONE node too (G1-coq-broken-cancel-after-done's
    # variant, here in the model itself): Bound.v no longer compiles, nothing is proved
    src = tmp_path / "src"
    shutil.copytree(coq.SOURCE_DIR, src, ignore=shutil.ignore_patterns("*.vo*", "*.glob"))
    model = src / "Loopproof.v"
    text = model.read_text()
    guard = "  | Cancel v =>\n      if ready g s v then"
    assert guard in text
    model.write_text(text.replace(guard, "  | Cancel v =>\n      if ready g s v || "
                                         "(live s && status_eqb (st s v) DONE) then"))
    monkeypatch.setattr(coq, "SOURCE_DIR", src)
    monkeypatch.setattr(coq, "CACHE", tmp_path / "cache")
    with pytest.raises(coq.CoqUnavailable, match="Bound.v"):
        coq.build()
    assert not any(Path(tmp_path / "cache").glob("*/assumptions.json"))
