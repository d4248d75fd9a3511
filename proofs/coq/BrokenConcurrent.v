(** Broken variants of the concurrent model, each [cstep] with one rule changed, and for each a
    closed proof of a concrete run that breaks what ConcurrentBound.v and Terminates.v prove of
    the real model (and, where the run is finite, that the real model refuses it):

    - check-then-reserve: Begin checks only settled + c_v <= B (nothing in flight counted) and a
      reservation trusts admission (its c_v only): two attempts in flight overspend B;
    - check-then-admit: the same admission, reservations still checked against B: B holds, but
      the attempts in flight are promised more than B (the held bound), and one is starved;
    - a Repair while a node of S_u is in flight: the reset re-opens that node while its attempt
      still holds a reservation, and the next admission promises more than B;
    - per-node repair budgets (each node's own counter, started afresh by the repair that
      re-opens it, as in G1-broken-per-activation-repairs): a run from Init repeats forever
      under G1's two assumptions, the measure of Terminates.v back where it was. *)

From Coq Require Import List Arith Lia ZArith Bool Relation_Operators Transitive_Closure.
From Loopproof Require Import Loopproof Broken Concurrent Terminates.
Import ListNotations.
Open Scope nat_scope.

Fixpoint crun_with (f : cgraph -> cstate -> cevent -> option cstate) g s (es : list cevent) :=
  match es with
  | [] => Some s
  | e :: rest => match f g s e with Some s' => crun_with f g s' rest | None => None end
  end.

(** Admission sees only what is settled: settled + c_v <= B, the serial rule. *)
Definition check_settled (g : cgraph) (s : cstate) (e : cevent) : option cstate :=
  match e with
  | CBegin v => if cready g s v && fits (base g) (ctl s) v then Some (begin_effect g s v)
                else None
  | _ => cstep g s e
  end.

(** Admission sees only what is settled, and each reservation trusts it (c_v only). *)
Definition check_then_reserve (g : cgraph) (s : cstate) (e : cevent) : option cstate :=
  match e with
  | CReserve amount node =>
      match cin_attempt g s node with
      | Some i => if (0 <=? amount)%Z && (spt s i + amount <=? ceiling (base g) i)%Z
                  then Some (reserve_effect s i amount) else None
      | None => None
      end
  | _ => check_settled g s e
  end.

(** A Repair that does not wait for the attempts in flight in S_u. *)
Definition repair_in_flight (g : cgraph) (s : cstate) (e : cevent) : option cstate :=
  match e with
  | CRepair d u =>
      let x := ctl s in
      if live x && Nat.ltb d (size (base g)) && existsb (Nat.eqb u) (repairs (base g) d)
         && status_eqb (st x d) EXHAUSTED && Nat.ltb (repairs_used x) (repair_budget (base g))
      then Some (repair_effect g s u (S (repairs_used x)))
      else None
  | _ => cstep g s e
  end.

(** ---- check-then-reserve: two attempts in flight overspend B ---------------------------------- *)

(** Two independent nodes, c = 1 quantum each, B = 1 quantum, two in flight. *)
Definition pair_graph := par (nodes_of [(1, 1%Z, [], []); (1, 1%Z, [], [])] 0 (Some 1%Z)) 2.
Definition pair_run := [CBegin 0; CBegin 1; CReserve 1 (Some 0); CReserve 1 (Some 1)].

Theorem broken_check_then_reserve_overspends :
  (exists s, crun_with check_then_reserve pair_graph (cinit pair_graph) pair_run = Some s
             /\ (1 < settled (ctl s) + reserved (ctl s))%Z)
  /\ crun pair_graph (cinit pair_graph) pair_run = None.
Proof. split; [eexists; split; [vm_compute; reflexivity|vm_compute; reflexivity]|].
  vm_compute. reflexivity. Qed.

(** The same admission with reservations checked against B: after Begin(a), Begin(b) the
    attempts in flight hold 2 quanta of ceiling against B = 1, and once a reserves its whole
    c_a, b cannot reserve its own. *)
Definition admit_run := [CBegin 0; CBegin 1].

Theorem broken_check_then_admit_overcommits :
  (exists s, crun_with check_settled pair_graph (cinit pair_graph) admit_run = Some s
             /\ (1 < held pair_graph s)%Z /\ (1 < committed pair_graph s)%Z)
  /\ crun_with check_settled pair_graph (cinit pair_graph) pair_run = None
  /\ crun pair_graph (cinit pair_graph) admit_run = None.
Proof. split; [eexists; split; [vm_compute; reflexivity|vm_compute; split; reflexivity]|].
  split; vm_compute; reflexivity. Qed.

(** ---- a repair while a node of S_u is in flight ---------------------------------------------- *)

(** r -> x, r -> y, y repairs r, K = 1; c_r = c_x = 1 quantum, c_y = 0, B = 1 quantum; two in
    flight.  r passes, x begins and reserves its quantum, y is cancelled, and Repair(y -> r)
    re-opens r, x and y while x's attempt is in flight: x is PENDING with its reservation still
    open, and Begin(r), counting only the attempts in flight, is admitted on the same quantum. *)
Definition tree_graph :=
  par (nodes_of [(1, 1%Z, [], []); (1, 1%Z, [0], []); (1, 0%Z, [0], [0])] 1 (Some 1%Z)) 2.
Definition tree_run := [CBegin 0; CVerdict 0 true; CBegin 1; CCancel 2; CReserve 1 (Some 1);
                        CRepair 2 0; CBegin 0].

Theorem broken_repair_in_flight_overcommits :
  (exists s, crun_with repair_in_flight tree_graph (cinit tree_graph) tree_run = Some s
             /\ st (ctl s) 1 = PENDING /\ res s 1 = 1%Z /\ (1 < committed tree_graph s)%Z)
  /\ crun tree_graph (cinit tree_graph) tree_run = None.
Proof. split; [eexists; split; [vm_compute; reflexivity|vm_compute; repeat split]|].
  vm_compute. reflexivity. Qed.

(** ---- per-node repair budgets: a run that never ends ------------------------------------------ *)

(** Each node has its own repair counter [rep], checked against K; a repair re-opens S_u with
    fresh counters (d's among them), and no count is kept for the run. *)
Definition vstate : Type := (cstate * (nat -> nat))%type.

Definition per_node_repairs (g : cgraph) (y : vstate) (e : cevent) : option vstate :=
  let (s, rep) := y in
  let x := ctl s in
  match e with
  | CRepair d u =>
      if live x && Nat.ltb d (size (base g)) && existsb (Nat.eqb u) (repairs (base g) d)
         && status_eqb (st x d) EXHAUSTED && Nat.ltb (rep d) (repair_budget (base g))
         && subtree_idle g s u then
        Some (repair_effect g s u (repairs_used x),
              fun w => if in_subtree (base g) u w then 0
                       else if Nat.eqb w d then S (rep d) else rep w)
      else None
  | CFail v =>
      if live x && Nat.ltb v (size (base g)) && status_eqb (st x v) EXHAUSTED
         && negb (has_pair (base g) v && Nat.ltb (rep v) (repair_budget (base g)))
         && Nat.eqb (nrun g s) 0
      then Some (with_ctl s (with_outcome x OFAILED), rep) else None
  | _ => match cstep g s e with Some s' => Some (s', rep) | None => None end
  end.

Definition vinit (g : cgraph) : vstate := (cinit g, fun _ => 0).

Fixpoint vrun (g : cgraph) (y : vstate) (es : list cevent) : option vstate :=
  match es with
  | [] => Some y
  | e :: rest => match per_node_repairs g y e with Some y' => vrun g y' rest | None => None end
  end.

(** The variant under G1's two assumptions, as [tstep] states them for the real model. *)
Inductive vtstep (g : cgraph) (P C : nat) : vstate * (nat -> nat) -> vstate * (nat -> nat) -> Prop :=
| vtstep_event s rep ops e y' : per_node_repairs g (s, rep) e = Some y' ->
    allowed g P C s ops e -> vtstep g P C ((s, rep), ops) (y', ghost g s ops e).

(** a -> b, b repairs a, a_a = a_b = 1, K = 1, B unbounded, one attempt in flight. *)
Definition lasso_graph := par (nodes_of [(1, 1%Z, [], []); (1, 1%Z, [0], [0])] 1 None) 1.
Definition lasso_loop := [CBegin 0; CVerdict 0 true; CBegin 1; CVerdict 1 false; CRepair 1 0].

(** The states the loop starts from: both nodes PENDING with no attempt and no repair counted. *)
Definition loop_start (y : vstate) : Prop :=
  live (ctl (fst y)) = true /\ st (ctl (fst y)) 0 = PENDING /\ st (ctl (fst y)) 1 = PENDING
  /\ atts (ctl (fst y)) 0 = 0 /\ atts (ctl (fst y)) 1 = 0 /\ snd y 0 = 0 /\ snd y 1 = 0.

Lemma loop_again y : loop_start y ->
  exists y', vrun lasso_graph y lasso_loop = Some y' /\ loop_start y'.
Proof.
  destruct y as [s rep]. intros (Hl & H0 & H1 & A0 & A1 & R0 & R1). simpl in *.
  assert (Ho : outc (ctl s) = ORUNNING) by (unfold live in Hl; destruct (outc (ctl s)); congruence).
  eexists. split.
  - unfold lasso_loop.
    do 8 (unfold vrun, per_node_repairs, cstep, cready, cfits, nrun, any_exhausted, is_running,
            cin_attempt, cend_attempt, subtree_idle, live, upd, with_ctl; simpl;
          rewrite ?Ho, ?H0, ?H1, ?A0, ?A1, ?R0, ?R1; simpl).
    reflexivity.
  - simpl. unfold upd. simpl. repeat split; auto.
Qed.

(** Every assumption of Terminates.v holds along the loop: it has no metered operation, no
    claim and no crash. *)
Lemma run_steps P C : forall es y ops y', es <> [] ->
  (forall e, In e es -> match e with CBegin _ | CVerdict _ _ | CRepair _ _ => True
                       | _ => False end) ->
  vrun lasso_graph y es = Some y' ->
  exists ops', clos_trans _ (fun b a => vtstep lasso_graph P C a b) (y', ops') (y, ops).
Proof.
  induction es as [|e es IH]; intros y ops y' Hne Hk H; [congruence|].
  simpl in H. destruct (per_node_repairs lasso_graph y e) as [y1|] eqn:E; [|discriminate].
  destruct y as [s rep].
  assert (St : vtstep lasso_graph P C ((s, rep), ops) (y1, ghost lasso_graph s ops e)).
  { constructor; auto. specialize (Hk e (or_introl eq_refl)).
    split; destruct e; try contradiction; simpl; intros; discriminate. }
  destruct es as [|e' es'].
  - simpl in H. injection H as <-. exists (ghost lasso_graph s ops e). apply t_step. exact St.
  - destruct (IH y1 (ghost lasso_graph s ops e) y' ltac:(discriminate)
                 (fun x Hx => Hk x (or_intror Hx)) H) as (ops' & T).
    exists ops'. eapply t_trans; [exact T|]. apply t_step. exact St.
Qed.

Theorem broken_per_node_repairs_runs_forever :
  (exists y, vrun lasso_graph (vinit lasso_graph) lasso_loop = Some y
             /\ loop_start y /\ loop_start (vinit lasso_graph)
             /\ forall P C, measure (base lasso_graph) P C (ctl (fst y)) (fun _ => 0)
                            = measure (base lasso_graph) P C (ctl (fst (vinit lasso_graph)))
                                      (fun _ => 0))
  /\ forall P C, ~ Acc (fun b a => vtstep lasso_graph P C a b) (vinit lasso_graph, fun _ => 0).
Proof.
  split.
  - eexists. split; [vm_compute; reflexivity|].
    split; [vm_compute; repeat split|]. split; [vm_compute; repeat split|].
    intros P C. vm_compute. reflexivity.
  - intros P C Hacc. apply Acc_clos_trans in Hacc.
    assert (K : forall z, Acc (clos_trans _ (fun b a => vtstep lasso_graph P C a b)) z ->
                loop_start (fst z) -> False).
    { intros z Hz. induction Hz as [[y ops] _ IH]. intros Start. simpl in Start.
      destruct (loop_again y Start) as (y' & Hrun & Start').
      destruct (run_steps P C lasso_loop y ops y' ltac:(discriminate)
                  (fun e He => ltac:(simpl in He; repeat destruct He as [<-|He];
                                     simpl; auto; contradiction)) Hrun) as (ops' & T).
      exact (IH (y', ops') T Start'). }
    apply (K _ Hacc). vm_compute. repeat split.
Qed.
