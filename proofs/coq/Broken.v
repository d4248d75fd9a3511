(** Broken variants of the model: each differs from [step] in one guard, and Coq proves of each
    a concrete run from Init that breaks what Bound.v proves of the real model (so the proofs can
    fail: a proof of these theorems for the variants would be refuted by these runs). *)

From Coq Require Import List Arith Lia ZArith Bool.
From Loopproof Require Import Loopproof.
Import ListNotations.
Open Scope nat_scope.

(** The operator's Cancel also allowed on a DONE node (as proofs/cancel.py's broken variant). *)
Definition step_cancel_done (g : graph) (s : state) (e : event) : option state :=
  match e with
  | Cancel v =>
      if live s && Nat.ltb v (size g) && status_eqb (st s v) DONE then
        Some (mkState (upd (st s) v EXHAUSTED) (act s) (atts s) (passes s)
                      ((v, act s v) :: cancelled s) (repairs_used s) (total s) (abandoned s)
                      (settled s) (reserved s) (attempt_spend s) (outc s))
      else step g s e
  | _ => step g s e
  end.

(** Begin without the needs check. *)
Definition step_begin_ignores_needs (g : graph) (s : state) (e : event) : option state :=
  match e with
  | Begin v =>
      if Nat.ltb v (size g) && live s
         && match running g s with None => true | Some _ => false end
         && negb (any_exhausted g s) && status_eqb (st s v) PENDING && fits g s v then
        Some (mkState (upd (st s) v RUNNING) (act s) (upd (atts s) v (S (atts s v)))
                      (passes s) (cancelled s) (repairs_used s) (S (total s)) (abandoned s)
                      (settled s) (reserved s) 0%Z (outc s))
      else None
  | _ => step g s e
  end.

(** Settle may charge one quantum more than it releases (the tolerant Settle that
    docs/proofs.md, "Found by these proofs", reports: settled creeps past B). *)
Definition step_settle_tolerant (g : graph) (s : state) (e : event) : option state :=
  match e with
  | Settle amount of =>
      match in_attempt g s with
      | Some _ =>
          let released := match of with None => reserved s | Some o => o end in
          if match of with None => true | Some o => (0 <=? o)%Z && (o <=? reserved s)%Z end
             && (0 <=? amount)%Z && (amount <=? released + 1)%Z then
            Some (mkState (st s) (act s) (atts s) (passes s) (cancelled s) (repairs_used s)
                          (total s) (abandoned s) (settled s + amount) (reserved s - released)
                          (attempt_spend s - released + amount) (outc s))
          else None
      | None => None
      end
  | _ => step g s e
  end.

(** A reservation checked against B only, not against the attempt's ceiling c_v. *)
Definition step_ceiling_unchecked (g : graph) (s : state) (e : event) : option state :=
  match e with
  | Reserve amount =>
      match in_attempt g s with
      | Some r =>
          if (0 <=? amount)%Z
             && match spend_budget g with None => true
                | Some b => (settled s + reserved s + amount <=? b)%Z end then
            Some (mkState (st s) (act s) (atts s) (passes s) (cancelled s) (repairs_used s)
                          (total s) (abandoned s) (settled s) (reserved s + amount)
                          (attempt_spend s + amount) (outc s))
          else None
      | None => None
      end
  | _ => step g s e
  end.

Fixpoint run_with (f : graph -> state -> event -> option state) g s (es : list event) :=
  match es with
  | [] => Some s
  | e :: rest => match f g s e with Some s' => run_with f g s' rest | None => None end
  end.

Definition nodes_of (l : list (nat * Z * list nat * list nat)) k b : graph :=
  mkGraph (length l)
    (fun i => match nth_error l i with Some (a, _, _, _) => a | None => 1 end)
    (fun i => match nth_error l i with Some (_, c, _, _) => c | None => 0%Z end)
    (fun i => match nth_error l i with Some (_, _, n, _) => n | None => [] end)
    (fun i => match nth_error l i with Some (_, _, _, r) => r | None => [] end) k b.

(** a -> b, a repairs itself, K = 1 (W = 3): a, b pass, Cancel(a), Repair(a, a) re-runs b. *)
Definition cancel_graph := nodes_of [(1, 1%Z, [], [0]); (1, 1%Z, [0], [])] 1 None.
Definition cancel_run := [Begin 0; Verdict 0 true; Begin 1; Verdict 1 true; Cancel 0;
                          Repair 0 0; Begin 0; Verdict 0 true; Begin 1].

Theorem broken_cancel_done_exceeds_W :
  exists s, run_with step_cancel_done cancel_graph (init cancel_graph) cancel_run = Some s
            /\ W cancel_graph < total s.
Proof. eexists. split; [vm_compute; reflexivity|vm_compute; lia]. Qed.

(** a -> b: Begin(b) from Init starts b while its ancestor a is PENDING. *)
Definition needs_graph := nodes_of [(1, 1%Z, [], []); (1, 1%Z, [0], [])] 0 None.
Definition needs_run := [Begin 1].

Theorem broken_begin_ignores_needs_starts_early :
  exists s, run_with step_begin_ignores_needs needs_graph (init needs_graph) needs_run = Some s
            /\ st s 1 = RUNNING /\ st s 0 <> DONE.
Proof. eexists. split; [vm_compute; reflexivity|vm_compute; split; [reflexivity|discriminate]].
Qed.

(** one node, c = 1, B = 1: Begin, then two Settles of one quantum with nothing reserved. *)
Definition spend_graph := nodes_of [(1, 1%Z, [], [])] 0 (Some 1%Z).
Definition spend_run := [Begin 0; Settle 1 None; Settle 1 None].

Theorem broken_settle_tolerant_overspends :
  exists s, run_with step_settle_tolerant spend_graph (init spend_graph) spend_run = Some s
            /\ (1 < settled s + reserved s)%Z.
Proof. eexists. split; [vm_compute; reflexivity|vm_compute; reflexivity]. Qed.

(** one node, c = 1, B = 10 quanta: Begin, Reserve 2 holds more than c in one attempt. *)
Definition ceiling_graph := nodes_of [(1, 1%Z, [], [])] 0 (Some 10%Z).
Definition ceiling_run := [Begin 0; Reserve 2].

Theorem broken_ceiling_unchecked_exceeds_c :
  exists s, run_with step_ceiling_unchecked ceiling_graph (init ceiling_graph) ceiling_run = Some s
            /\ st s 0 = RUNNING /\ (ceiling ceiling_graph 0 < attempt_spend s)%Z.
Proof. eexists. split; [vm_compute; reflexivity|vm_compute; split; reflexivity]. Qed.
