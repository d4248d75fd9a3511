(** The run model of model/transitions.py, for every finite DAG, and G1's closed form W.

    Nodes are the indices 0 .. size-1 in the model's topological order (graph.names), so a
    need of node w is an index below w.  Spend is an integer count of one fixed quantum (the
    differential test scales the model's binary-fraction amounts by it), so the model's float
    tolerance EPS is exact equality here; an unbounded B is [None].  Every event kind of
    model/transitions.py is here with its guard and its effect; [step] returns [None] where the
    model raises [Disabled]. *)

From Coq Require Import List Arith Lia ZArith Bool.
Import ListNotations.
Open Scope nat_scope.

Inductive status := PENDING | RUNNING | DONE | EXHAUSTED.
Inductive outcome := ORUNNING | ODONE | OFAILED | OBUDGET.

Definition status_eqb (x y : status) : bool :=
  match x, y with
  | PENDING, PENDING | RUNNING, RUNNING | DONE, DONE | EXHAUSTED, EXHAUSTED => true
  | _, _ => false
  end.

Lemma status_eqb_eq x y : status_eqb x y = true <-> x = y.
Proof. destruct x, y; simpl; split; congruence. Qed.

(** ---- the graph ---------------------------------------------------------------------------- *)

Record graph := mkGraph {
  size : nat;
  attempts_of : nat -> nat;        (* a_v *)
  ceiling : nat -> Z;              (* c_v, in quanta *)
  needs : nat -> list nat;
  repairs : nat -> list nat;       (* R: the pairs (d, u) with u in repairs d *)
  repair_budget : nat;             (* K *)
  spend_budget : option Z          (* B, in quanta; None: unbounded *)
}.

(** [anc g v w]: v is a strict ancestor of w (a chain of needs leads from v to w). *)
Inductive anc (g : graph) : nat -> nat -> Prop :=
| anc_edge v w : In v (needs g w) -> anc g v w
| anc_step v p w : In p (needs g w) -> anc g v p -> anc g v w.

Record wf (g : graph) : Prop := {
  wf_attempts : forall v, v < size g -> 1 <= attempts_of g v;
  wf_needs : forall w p, w < size g -> In p (needs g w) -> p < w;
  wf_repairs : forall d u, d < size g -> In u (repairs g d) -> u = d \/ anc g u d;
  wf_budget : forall b, spend_budget g = Some b -> (0 <= b)%Z;
  wf_ceilings : forall v, v < size g -> (0 <= ceiling g v)%Z
}.

(** The computable ancestor test: a need path from w down to v has at most w steps. *)
Fixpoint ancb_f (g : graph) (f v w : nat) : bool :=
  match f with
  | O => false
  | S f' => existsb (fun p => Nat.eqb p v || ancb_f g f' v p) (needs g w)
  end.

Definition ancb g v w := ancb_f g (S w) v w.

(** w in S_u = {u} u desc(u) *)
Definition in_subtree g u w := Nat.eqb w u || ancb g u w.

Fixpoint sum (n : nat) (f : nat -> nat) : nat :=
  match n with O => 0 | S m => sum m f + f m end.

Definition pairs g : list (nat * nat) :=
  flat_map (fun d => map (fun u => (d, u)) (repairs g d)) (seq 0 (size g)).

(** Sum over S_u \ desc(d) of a_w: what a repair (d, u) can make run again. *)
Definition weight g (p : nat * nat) : nat :=
  let (d, u) := p in
  sum (size g) (fun w => if in_subtree g u w && negb (ancb g d w) then attempts_of g w else 0).

Definition max_weight g : nat := fold_right (fun p m => Nat.max (weight g p) m) 0 (pairs g).

(** W = sum_v a_v + K * max_{(d,u) in R} sum_{w in S_u \ desc(d)} a_w  (model/bounds.py) *)
Definition W g : nat := sum (size g) (attempts_of g) + repair_budget g * max_weight g.

(** ---- the state ---------------------------------------------------------------------------- *)

Record state := mkState {
  st : nat -> status;
  act : nat -> nat;
  atts : nat -> nat;
  passes : list (nat * nat);
  cancelled : list (nat * nat);
  repairs_used : nat;
  total : nat;                     (* attempts_total *)
  abandoned : nat;
  settled : Z;
  reserved : Z;
  attempt_spend : Z;
  outc : outcome
}.

Definition init (g : graph) : state :=
  mkState (fun _ => PENDING) (fun _ => 0) (fun _ => 0) [] [] 0 0 0 0%Z 0%Z 0%Z ORUNNING.

Definition upd {A} (f : nat -> A) (i : nat) (x : A) : nat -> A :=
  fun j => if Nat.eqb j i then x else f j.

Inductive event :=
| Begin (v : nat)
| Refuse (v : nat)
| Reserve (amount : Z)
| Overrun (amount : Z)
| Settle (amount : Z) (of : option Z)
| Verdict (v : nat) (passed : bool)
| Abandon (v : nat)
| Claim (v : nat)
| Cancel (v : nat)
| Repair (d u : nat)
| Fail (v : nat)
| Finish.

(** ---- shared guards ------------------------------------------------------------------------ *)

Definition live s := match outc s with ORUNNING => true | _ => false end.

(** The node with an attempt in flight: the first RUNNING one, as RunState.running. *)
Definition running g s : option nat :=
  find (fun i => status_eqb (st s i) RUNNING) (seq 0 (size g)).

Definition any_exhausted g s : bool :=
  existsb (fun i => status_eqb (st s i) EXHAUSTED) (seq 0 (size g)).

Definition all_done g s : bool := forallb (fun i => status_eqb (st s i) DONE) (seq 0 (size g)).

Definition ready g s v : bool :=
  Nat.ltb v (size g) && live s
  && match running g s with None => true | Some _ => false end
  && negb (any_exhausted g s) && status_eqb (st s v) PENDING
  && forallb (fun p => status_eqb (st s p) DONE) (needs g v).

Definition fits g s v : bool :=
  match spend_budget g with None => true | Some b => (settled s + ceiling g v <=? b)%Z end.

Definition in_attempt g s : option nat := if live s then running g s else None.

Definition reservation_fits g s r amount : bool :=
  (attempt_spend s + amount <=? ceiling g r)%Z
  && match spend_budget g with
     | None => true
     | Some b => (settled s + reserved s + amount <=? b)%Z
     end.

Definition end_attempt g s i (passed : bool) : state :=
  if passed then
    mkState (upd (st s) i DONE) (act s) (atts s) ((i, act s i) :: passes s) (cancelled s)
            (repairs_used s) (total s) (abandoned s) (settled s) (reserved s) 0%Z (outc s)
  else
    mkState (upd (st s) i (if Nat.ltb (atts s i) (attempts_of g i) then PENDING else EXHAUSTED))
            (act s) (atts s) (passes s) (cancelled s)
            (repairs_used s) (total s) (abandoned s) (settled s) (reserved s) 0%Z (outc s).

Definition with_outcome s o : state :=
  mkState (st s) (act s) (atts s) (passes s) (cancelled s) (repairs_used s) (total s)
          (abandoned s) (settled s) (reserved s) (attempt_spend s) o.

Definition has_pair g d : bool := match repairs g d with [] => false | _ => true end.

(** ---- the transition function ------------------------------------------------------------- *)

Definition step (g : graph) (s : state) (e : event) : option state :=
  match e with
  | Begin v =>
      if ready g s v && fits g s v then
        Some (mkState (upd (st s) v RUNNING) (act s) (upd (atts s) v (S (atts s v)))
                      (passes s) (cancelled s) (repairs_used s) (S (total s)) (abandoned s)
                      (settled s) (reserved s) 0%Z (outc s))
      else None
  | Refuse v => if ready g s v && negb (fits g s v) then Some (with_outcome s OBUDGET) else None
  | Reserve amount =>
      match in_attempt g s with
      | Some r =>
          if (0 <=? amount)%Z && reservation_fits g s r amount then
            Some (mkState (st s) (act s) (atts s) (passes s) (cancelled s) (repairs_used s)
                          (total s) (abandoned s) (settled s) (reserved s + amount)
                          (attempt_spend s + amount) (outc s))
          else None
      | None => None
      end
  | Overrun amount =>
      match in_attempt g s with
      | Some r =>
          if (0 <=? amount)%Z && (reserved s <=? 0)%Z && negb (reservation_fits g s r amount)
          then Some (end_attempt g s r false) else None
      | None => None
      end
  | Settle amount of =>
      match in_attempt g s with
      | Some _ =>
          let released := match of with None => reserved s | Some o => o end in
          if match of with None => true | Some o => (0 <=? o)%Z && (o <=? reserved s)%Z end
             && (0 <=? amount)%Z && (amount <=? released)%Z then
            Some (mkState (st s) (act s) (atts s) (passes s) (cancelled s) (repairs_used s)
                          (total s) (abandoned s) (settled s + amount) (reserved s - released)
                          (attempt_spend s - released + amount) (outc s))
          else None
      | None => None
      end
  | Verdict v passed =>
      match in_attempt g s with
      | Some r => if Nat.eqb r v && (reserved s <=? 0)%Z then Some (end_attempt g s v passed)
                  else None
      | None => None
      end
  | Abandon v =>
      match in_attempt g s with
      | Some r =>
          if Nat.eqb r v then
            Some (mkState (upd (st s) v PENDING) (act s) (upd (atts s) v (pred (atts s v)))
                          (passes s) (cancelled s) (repairs_used s) (pred (total s))
                          (S (abandoned s)) (settled s + reserved s) 0%Z 0%Z (outc s))
          else None
      | None => None
      end
  | Claim v =>
      match in_attempt g s with
      | Some r => if Nat.eqb r v then Some s else None
      | None => None
      end
  | Cancel v =>
      if ready g s v then
        Some (mkState (upd (st s) v EXHAUSTED) (act s) (atts s) (passes s)
                      ((v, act s v) :: cancelled s) (repairs_used s) (total s) (abandoned s)
                      (settled s) (reserved s) (attempt_spend s) (outc s))
      else None
  | Repair d u =>
      if live s && Nat.ltb d (size g) && existsb (Nat.eqb u) (repairs g d)
         && status_eqb (st s d) EXHAUSTED && Nat.ltb (repairs_used s) (repair_budget g) then
        Some (mkState (fun w => if in_subtree g u w then PENDING else st s w)
                      (fun w => if in_subtree g u w then S (act s w) else act s w)
                      (fun w => if in_subtree g u w then 0 else atts s w)
                      (passes s) (cancelled s) (S (repairs_used s)) (total s) (abandoned s)
                      (settled s) (reserved s) (attempt_spend s) (outc s))
      else None
  | Fail v =>
      if live s && Nat.ltb v (size g) && status_eqb (st s v) EXHAUSTED
         && negb (has_pair g v && Nat.ltb (repairs_used s) (repair_budget g))
      then Some (with_outcome s OFAILED) else None
  | Finish => if live s && all_done g s then Some (with_outcome s ODONE) else None
  end.

Inductive reachable (g : graph) : state -> Prop :=
| reach_init : reachable g (init g)
| reach_step s e s' : reachable g s -> step g s e = Some s' -> reachable g s'.

(** Running a list of events from a state: None as soon as one is disabled. *)
Fixpoint run (g : graph) (s : state) (es : list event) : option state :=
  match es with
  | [] => Some s
  | e :: rest => match step g s e with Some s' => run g s' rest | None => None end
  end.
