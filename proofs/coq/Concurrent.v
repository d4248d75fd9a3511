(** Several attempts in flight: the concurrent run model of model/transitions.py, for every
    finite DAG and every max_parallel (docs/design.md, "Several attempts in flight").

    A concurrent state is the serial state of Loopproof.v (its [ctl]: statuses, counters, the
    pass and cancel sets, settled, and the totals [reserved] and [attempt_spend] over the
    attempts in flight, as RunState keeps them) together with each node's own account: [res v]
    its attempt's open reservations and [spt v] what that attempt has settled plus holds, as
    RunState.account reads them.  Spend events name their attempt ([None]: the only one in
    flight; refused while two or more are).  Each guard and effect is the model's:

    - Begin(v) needs fewer than max_parallel attempts in flight, nothing EXHAUSTED, v PENDING
      with its needs DONE, and held + c_v <= B, where [held] (RunState.held) is settled plus
      what every attempt in flight may still charge, c_w minus what it has settled;
    - Refuse and Fail need no attempt in flight; a Repair waits while a node of S_u has one;
    - Reserve, Overrun, Settle, Verdict, Abandon and Claim act on the named attempt only, and
      an attempt that ends leaves the totals with its own account.

    Serial.v proves that with max_parallel = 1 this is the serial [step], and that every serial
    run is a run here for every max_parallel >= 1. *)

From Coq Require Import List Arith Lia ZArith Bool.
From Loopproof Require Import Loopproof.
Import ListNotations.
Open Scope nat_scope.

Record cgraph := mkCGraph { base : graph; max_parallel : nat }.

(** The graph [g] with at most [m] attempts in flight. *)
Definition par (g : graph) (m : nat) : cgraph := mkCGraph g m.

Record cstate := mkC { ctl : state; res : nat -> Z; spt : nat -> Z }.

Definition cinit (g : cgraph) : cstate := mkC (init (base g)) (fun _ => 0%Z) (fun _ => 0%Z).

Inductive cevent :=
| CBegin (v : nat)
| CRefuse (v : nat)
| CReserve (amount : Z) (node : option nat)
| COverrun (amount : Z) (node : option nat)
| CSettle (amount : Z) (of : option Z) (node : option nat)
| CVerdict (v : nat) (passed : bool)
| CAbandon (v : nat)
| CClaim (v : nat)
| CCancel (v : nat)
| CRepair (d u : nat)
| CFail (v : nat)
| CFinish.

(** A serial event as a concurrent one (a spend event names no attempt), and back. *)
Definition embed (e : event) : cevent :=
  match e with
  | Begin v => CBegin v | Refuse v => CRefuse v | Reserve x => CReserve x None
  | Overrun x => COverrun x None | Settle x o => CSettle x o None
  | Verdict v p => CVerdict v p | Abandon v => CAbandon v | Claim v => CClaim v
  | Cancel v => CCancel v | Repair d u => CRepair d u | Fail v => CFail v | Finish => CFinish
  end.

Definition erase (e : cevent) : event :=
  match e with
  | CBegin v => Begin v | CRefuse v => Refuse v | CReserve x _ => Reserve x
  | COverrun x _ => Overrun x | CSettle x o _ => Settle x o
  | CVerdict v p => Verdict v p | CAbandon v => Abandon v | CClaim v => Claim v
  | CCancel v => Cancel v | CRepair d u => Repair d u | CFail v => Fail v | CFinish => Finish
  end.

Fixpoint zsum (n : nat) (f : nat -> Z) : Z :=
  match n with O => 0%Z | S m => (zsum m f + f m)%Z end.

(** ---- shared guards ------------------------------------------------------------------------ *)

Definition is_running (x : state) (i : nat) : bool := status_eqb (st x i) RUNNING.

(** How many attempts are in flight (RunState.in_flight_count). *)
Definition nrun (g : cgraph) (s : cstate) : nat :=
  sum (size (base g)) (fun i => if is_running (ctl s) i then 1 else 0).

(** RunState.held: settled + what every attempt in flight may still charge (its c_w minus what
    it has settled, spt - res). *)
Definition held (g : cgraph) (s : cstate) : Z :=
  (settled (ctl s) + zsum (size (base g)) (fun w =>
     if is_running (ctl s) w then ceiling (base g) w - (spt s w - res s w) else 0))%Z.

Definition cready (g : cgraph) (s : cstate) (v : nat) : bool :=
  Nat.ltb v (size (base g)) && live (ctl s) && Nat.ltb (nrun g s) (max_parallel g)
  && negb (any_exhausted (base g) (ctl s)) && status_eqb (st (ctl s) v) PENDING
  && forallb (fun p => status_eqb (st (ctl s) p) DONE) (needs (base g) v).

Definition cfits (g : cgraph) (s : cstate) (v : nat) : bool :=
  match spend_budget (base g) with
  | None => true
  | Some b => (held g s + ceiling (base g) v <=? b)%Z
  end.

(** The attempt a spend event, a verdict, a claim or an abandon acts on. *)
Definition cin_attempt (g : cgraph) (s : cstate) (node : option nat) : option nat :=
  if live (ctl s) then
    match node with
    | None => if Nat.eqb (nrun g s) 1 then running (base g) (ctl s) else None
    | Some v => if Nat.ltb v (size (base g)) && is_running (ctl s) v then Some v else None
    end
  else None.

Definition creservation_fits (g : cgraph) (s : cstate) (i : nat) (amount : Z) : bool :=
  (spt s i + amount <=? ceiling (base g) i)%Z
  && match spend_budget (base g) with
     | None => true
     | Some b => (settled (ctl s) + reserved (ctl s) + amount <=? b)%Z
     end.

(** No node of S_u has an attempt in flight. *)
Definition subtree_idle (g : cgraph) (s : cstate) (u : nat) : bool :=
  forallb (fun w => negb (in_subtree (base g) u w && is_running (ctl s) w))
          (seq 0 (size (base g))).

(** Attempt [i] ends: PASS -> DONE, else PENDING or EXHAUSTED; its account leaves the totals. *)
Definition cend_attempt (g : cgraph) (s : cstate) (i : nat) (passed : bool) : cstate :=
  let x := ctl s in
  if passed then
    mkC (mkState (upd (st x) i DONE) (act x) (atts x) ((i, act x i) :: passes x) (cancelled x)
                 (repairs_used x) (total x) (abandoned x) (settled x)
                 (reserved x - res s i)%Z (attempt_spend x - spt s i)%Z (outc x))
        (upd (res s) i 0%Z) (upd (spt s) i 0%Z)
  else
    mkC (mkState (upd (st x) i (if Nat.ltb (atts x i) (attempts_of (base g) i) then PENDING
                                else EXHAUSTED))
                 (act x) (atts x) (passes x) (cancelled x)
                 (repairs_used x) (total x) (abandoned x) (settled x)
                 (reserved x - res s i)%Z (attempt_spend x - spt s i)%Z (outc x))
        (upd (res s) i 0%Z) (upd (spt s) i 0%Z).

Definition with_ctl (s : cstate) (x : state) : cstate := mkC x (res s) (spt s).

(** Begin(v): v's attempt is in flight, with an empty account (with none in flight before, the
    totals start afresh, as the serial Begin's attempt_spend). *)
Definition begin_effect (g : cgraph) (s : cstate) (v : nat) : cstate :=
  let x := ctl s in
  mkC (mkState (upd (st x) v RUNNING) (act x) (upd (atts x) v (S (atts x v)))
               (passes x) (cancelled x) (repairs_used x) (S (total x)) (abandoned x)
               (settled x) (reserved x)
               (if Nat.eqb (nrun g s) 0 then 0%Z else attempt_spend x) (outc x))
      (upd (res s) v 0%Z) (upd (spt s) v 0%Z).

(** Reserve: attempt [i] holds [amount] more, and so do the totals. *)
Definition reserve_effect (s : cstate) (i : nat) (amount : Z) : cstate :=
  let x := ctl s in
  mkC (mkState (st x) (act x) (atts x) (passes x) (cancelled x) (repairs_used x)
               (total x) (abandoned x) (settled x) (reserved x + amount)%Z
               (attempt_spend x + amount)%Z (outc x))
      (upd (res s) i (res s i + amount)%Z) (upd (spt s) i (spt s i + amount)%Z).

(** Repair(d, u): S_u returns to PENDING with a new activation and no attempts; [used] is the
    run's repair count after it (the broken variants keep another). *)
Definition repair_effect (g : cgraph) (s : cstate) (u used : nat) : cstate :=
  let x := ctl s in
  with_ctl s (mkState (fun w => if in_subtree (base g) u w then PENDING else st x w)
                      (fun w => if in_subtree (base g) u w then S (act x w) else act x w)
                      (fun w => if in_subtree (base g) u w then 0 else atts x w)
                      (passes x) (cancelled x) used (total x) (abandoned x) (settled x)
                      (reserved x) (attempt_spend x) (outc x)).

(** ---- the transition function ------------------------------------------------------------- *)

Definition cstep (g : cgraph) (s : cstate) (e : cevent) : option cstate :=
  let x := ctl s in
  match e with
  | CBegin v => if cready g s v && cfits g s v then Some (begin_effect g s v) else None
  | CRefuse v =>
      if cready g s v && Nat.eqb (nrun g s) 0 && negb (cfits g s v)
      then Some (with_ctl s (with_outcome x OBUDGET)) else None
  | CReserve amount node =>
      match cin_attempt g s node with
      | Some i =>
          if (0 <=? amount)%Z && creservation_fits g s i amount then
            Some (reserve_effect s i amount)
          else None
      | None => None
      end
  | COverrun amount node =>
      match cin_attempt g s node with
      | Some i =>
          if (0 <=? amount)%Z && (res s i <=? 0)%Z && negb (creservation_fits g s i amount)
          then Some (cend_attempt g s i false) else None
      | None => None
      end
  | CSettle amount of node =>
      match cin_attempt g s node with
      | Some i =>
          let released := match of with None => res s i | Some o => o end in
          if match of with None => true | Some o => (0 <=? o)%Z && (o <=? res s i)%Z end
             && (0 <=? amount)%Z && (amount <=? released)%Z then
            Some (mkC (mkState (st x) (act x) (atts x) (passes x) (cancelled x) (repairs_used x)
                               (total x) (abandoned x) (settled x + amount)%Z
                               (reserved x - released)%Z (attempt_spend x - released + amount)%Z
                               (outc x))
                      (upd (res s) i (res s i - released)%Z)
                      (upd (spt s) i (spt s i - released + amount)%Z))
          else None
      | None => None
      end
  | CVerdict v passed =>
      match cin_attempt g s (Some v) with
      | Some i => if (res s i <=? 0)%Z then Some (cend_attempt g s i passed) else None
      | None => None
      end
  | CAbandon v =>
      match cin_attempt g s (Some v) with
      | Some i =>
          Some (mkC (mkState (upd (st x) i PENDING) (act x) (upd (atts x) i (pred (atts x i)))
                             (passes x) (cancelled x) (repairs_used x) (pred (total x))
                             (S (abandoned x)) (settled x + res s i)%Z (reserved x - res s i)%Z
                             (attempt_spend x - spt s i)%Z (outc x))
                    (upd (res s) i 0%Z) (upd (spt s) i 0%Z))
      | None => None
      end
  | CClaim v =>
      match cin_attempt g s (Some v) with
      | Some _ => Some s
      | None => None
      end
  | CCancel v =>
      if cready g s v then
        Some (with_ctl s (mkState (upd (st x) v EXHAUSTED) (act x) (atts x) (passes x)
                                  ((v, act x v) :: cancelled x) (repairs_used x) (total x)
                                  (abandoned x) (settled x) (reserved x) (attempt_spend x)
                                  (outc x)))
      else None
  | CRepair d u =>
      if live x && Nat.ltb d (size (base g)) && existsb (Nat.eqb u) (repairs (base g) d)
         && status_eqb (st x d) EXHAUSTED && Nat.ltb (repairs_used x) (repair_budget (base g))
         && subtree_idle g s u then Some (repair_effect g s u (S (repairs_used x)))
      else None
  | CFail v =>
      if live x && Nat.ltb v (size (base g)) && status_eqb (st x v) EXHAUSTED
         && negb (has_pair (base g) v && Nat.ltb (repairs_used x) (repair_budget (base g)))
         && Nat.eqb (nrun g s) 0
      then Some (with_ctl s (with_outcome x OFAILED)) else None
  | CFinish => if live x && all_done (base g) x then Some (with_ctl s (with_outcome x ODONE))
               else None
  end.

Inductive creachable (g : cgraph) : cstate -> Prop :=
| creach_init : creachable g (cinit g)
| creach_step s e s' : creachable g s -> cstep g s e = Some s' -> creachable g s'.

Fixpoint crun (g : cgraph) (s : cstate) (es : list cevent) : option cstate :=
  match es with
  | [] => Some s
  | e :: rest => match cstep g s e with Some s' => crun g s' rest | None => None end
  end.

(** What is settled, every open reservation (of any node) and what every attempt in flight may
    still reserve: G3's held bound counts all of it. *)
Definition committed (g : cgraph) (s : cstate) : Z :=
  (settled (ctl s) + zsum (size (base g)) (fun w =>
     res s w + if is_running (ctl s) w then ceiling (base g) w - spt s w else 0))%Z.
