(** Extraction of the step function, Init and W to OCaml, for the differential test against
    model.step (tests/proofs/test_coq_model.py) through proofs/coq/driver.ml.  nat and Z become OCaml's
    int (ExtrOcamlNatInt, ExtrOcamlZInt): the test's numbers are small, far from overflow. *)

From Coq Require Import Extraction ExtrOcamlBasic ExtrOcamlNatInt ExtrOcamlZInt.
From Loopproof Require Import Loopproof Broken.
Extraction Language OCaml.
Extraction "extracted.ml" step init W running ancb step_cancel_done step_begin_ignores_needs
  step_settle_tolerant step_ceiling_unchecked.
