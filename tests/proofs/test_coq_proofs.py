"""The `prover: coq` obligations can fail: a theorem that rests on an assumption, a source that
admits a lemma, a missing coqc and a model with a planted fault are never reported proved."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loopproof.proofs import coq, coq_theorems
from loopproof.proofs.obligations import OBLIGATIONS, discharge

BY_ID = {ob.id: ob for ob in OBLIGATIONS}
COQ = [ob for ob in OBLIGATIONS if ob.prover == "coq"]


def test_the_coq_obligations_are_listed_beside_the_z3_ones() -> None:
    assert {ob.id for ob in COQ} >= {"G1-coq-W-bound", "G1-coq-W-tight", "G1-coq-structural",
                                     "G3-coq-no-overspend", "G1-coq-W-bound-concurrent",
                                     "G1-coq-terminates", "G3-coq-no-overspend-concurrent",
                                     "G1-coq-serial-instance"}
    # every theorem the build checks is some obligation's, and the other way round
    named = {ob.statement.rsplit("(Coq: ", 1)[-1].rstrip(")") for ob in COQ if not ob.broken}
    refuted = {coq_theorems.WITNESSES[key].theorem for key in coq_theorems.WITNESSES}
    assert named | refuted | {"loopproof_serial_runs_concurrent"} == set(coq.THEOREMS)
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


def test_an_assumption_in_one_theorem_is_reported_for_that_theorem(monkeypatch, tmp_path) -> None:
    # the theorems are first printed together (one Print Assumptions for all of them); an axiom
    # under one of them is then found theorem by theorem, and only that one is not closed
    (tmp_path / "A.v").write_text(
        "From Coq Require Import Classical.\n"
        "Theorem t_closed : True. Proof. exact I. Qed.\n"
        "Theorem t_axiom : forall P : Prop, P \\/ ~ P. Proof. exact classic. Qed.\n")
    coq._run(["coqc", "-q", "-Q", ".", "Loopproof", "A.v"], tmp_path)
    monkeypatch.setattr(coq, "VERNAC", ("A.v",))
    monkeypatch.setattr(coq, "THEOREMS", ("t_closed", "t_axiom"))
    found = coq._assumptions(tmp_path)
    assert found["t_closed"] == coq.CLOSED
    assert "classic" in found["t_axiom"]
    (tmp_path / "A.v").write_text("Theorem t_closed : True. Proof. exact I. Qed.\n"
                                  "Theorem t_axiom : True. Proof. exact I. Qed.\n")
    coq._run(["coqc", "-q", "-Q", ".", "Loopproof", "A.v"], tmp_path)
    assert coq._assumptions(tmp_path) == {"t_closed": coq.CLOSED, "t_axiom": coq.CLOSED}


def test_a_repair_that_does_not_wait_breaks_the_concurrent_proof(monkeypatch, tmp_path) -> None:
    # the concurrent model's Repair without its wait for the attempts in flight in S_u
    # (G3-coq-broken-repair-in-flight's variant, here in the model itself): ConcurrentBound.v no
    # longer compiles, so nothing about the concurrent model is proved
    src = tmp_path / "src"
    shutil.copytree(coq.SOURCE_DIR, src, ignore=shutil.ignore_patterns("*.vo*", "*.glob"))
    model = src / "Concurrent.v"
    text = model.read_text()
    guard = "         && subtree_idle g s u then Some (repair_effect g s u (S (repairs_used x)))"
    assert guard in text
    model.write_text(text.replace(guard, "         then Some (repair_effect g s u "
                                         "(S (repairs_used x)))"))
    # Loopproof.v and Bound.v are unchanged: the real build's compiled files are copied in
    # place of compiling them again (the same sources, the same coqc)
    real, compile_ = coq.build(), coq._run
    compiled: list[str] = []

    def run(argv: list[str], cwd: Path) -> str:
        if argv[-1] in ("Loopproof.v", "Bound.v"):
            for made in real.directory.glob(argv[-1][:-2] + ".vo*"):
                shutil.copy(made, cwd / made.name)
            return ""
        compiled.append(argv[-1])
        return compile_(argv, cwd)

    monkeypatch.setattr(coq, "_run", run)
    monkeypatch.setattr(coq, "SOURCE_DIR", src)
    monkeypatch.setattr(coq, "CACHE", tmp_path / "cache")
    # only what ConcurrentBound.v rests on, to keep the build short
    monkeypatch.setattr(coq, "VERNAC", ("Loopproof.v", "Bound.v", "Concurrent.v",
                                        "ConcurrentBound.v"))
    with pytest.raises(coq.CoqUnavailable, match="ConcurrentBound.v"):
        coq.build()
    assert compiled == ["Concurrent.v", "ConcurrentBound.v"]  # the changed model, and its proof
    assert not any(Path(tmp_path / "cache").glob("*/assumptions.json"))
