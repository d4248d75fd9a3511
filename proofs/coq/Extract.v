(** Extraction of the step functions, Init and W to OCaml, for the differential test against
    model.step (tests/proofs/test_coq_model.py) through proofs/coq/driver.ml: the serial [step], the
    concurrent [cstep], and their broken variants.  nat and Z become OCaml's int
    (ExtrOcamlNatInt, ExtrOcamlZInt): the test's numbers are small, far from overflow. *)

From Coq Require Import Extraction ExtrOcamlBasic ExtrOcamlNatInt ExtrOcamlZInt.
From Loopproof Require Import Loopproof Broken Concurrent BrokenConcurrent.
Extraction Language OCaml.
Extraction "extracted.ml" step init W running ancb step_cancel_done step_begin_ignores_needs
  step_settle_tolerant step_ceiling_unchecked
  cstep cinit check_then_reserve check_settled repair_in_flight per_node_repairs vinit.
