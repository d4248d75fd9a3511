(** G1 (finishes), for every finite DAG and every max_parallel: under G1-ranking's two
    assumptions, at most P metered operations and claims per attempt and at most C recovered
    crashes in a run, every event of the model, serial or concurrent, strictly decreases

      (live, K - repairs_used, C - abandoned, sum_v mu_v, sum_v (P - ops_v))

    lexicographically in N^5, where mu_v is 0 once v is DONE or EXHAUSTED and otherwise
    2 (a_v - attempts_v), plus 1 while v has an attempt in flight.  The order is well founded, so
    every run ends.

    The assumptions are the environment's, so they are stated as a step relation: [tstep]
    ([sstep] for the serial model) is the model's step, with a ghost counter ops_v of the
    Reserve, Settle and Claim events of v's attempt (reset by Begin(v)), taken only while
    ops_v < P, and an Abandon taken only while abandoned < C.  Without them the model has runs
    that never end (docs/proofs.md: G1-ranking-needs-ops-bound, G1-unbounded-crashes-loop). *)

From Coq Require Import List Arith Lia ZArith Bool Relation_Operators Lexicographic_Product.
From Loopproof Require Import Loopproof Bound Concurrent ConcurrentBound Serial.
Import ListNotations.
Open Scope nat_scope.

(** ---- the measure --------------------------------------------------------------------------- *)

Definition mu (g : graph) (x : state) (v : nat) : nat :=
  match st x v with
  | DONE | EXHAUSTED => 0
  | RUNNING => 2 * (attempts_of g v - atts x v) + 1
  | PENDING => 2 * (attempts_of g v - atts x v)
  end.

Definition rank : Type := (nat * nat * nat * nat * nat)%type.

Definition measure (g : graph) (P C : nat) (x : state) (ops : nat -> nat) : rank :=
  (if live x then 1 else 0, repair_budget g - repairs_used x, C - abandoned x,
   sum (size g) (mu g x), sum (size g) (fun v => P - ops v)).

Definition lex : rank -> rank -> Prop :=
  slexprod _ _ (slexprod _ _ (slexprod _ _ (slexprod _ _ lt lt) lt) lt) lt.

Lemma lex_wf : well_founded lex.
Proof. repeat apply wf_slexprod; apply lt_wf. Qed.

Lemma lex_live l k c m o l' k' c' m' o' : l' < l -> lex (l', k', c', m', o') (l, k, c, m, o).
Proof. intros H. do 4 apply left_slex. exact H. Qed.

Lemma lex_repairs l k c m o k' c' m' o' : k' < k -> lex (l, k', c', m', o') (l, k, c, m, o).
Proof. intros H. do 3 apply left_slex. apply right_slex. exact H. Qed.

Lemma lex_crashes l k c m o c' m' o' : c' < c -> lex (l, k, c', m', o') (l, k, c, m, o).
Proof. intros H. do 2 apply left_slex. apply right_slex. exact H. Qed.

Lemma lex_nodes l k c m o m' o' : m' < m -> lex (l, k, c, m', o') (l, k, c, m, o).
Proof. intros H. apply left_slex. apply right_slex. exact H. Qed.

Lemma lex_ops l k c m o o' : o' < o -> lex (l, k, c, m, o') (l, k, c, m, o).
Proof. intros H. apply right_slex. exact H. Qed.

(** A measure that decreases along a relation from the states [reach] holds, which that relation
    keeps, leaves no infinite run from them. *)
Lemma acc_of_measure {A : Type} (R : A -> A -> Prop) (reach : A -> Prop) (f : A -> rank) :
  (forall a b, reach a -> R a b -> reach b /\ lex (f b) (f a)) ->
  forall a, reach a -> Acc (fun b a => R a b) a.
Proof.
  intros H. assert (forall r a, reach a -> f a = r -> Acc (fun b a => R a b) a) as K.
  { intros r. induction r as [r IH] using (well_founded_induction lex_wf).
    intros a Ha Er. constructor. intros b Hab. destruct (H a b Ha Hab) as [Hb Lt].
    apply (IH (f b)); auto. rewrite <- Er. exact Lt. }
  intros a Ha. apply (K (f a)); auto.
Qed.

(** ---- the model under the two assumptions ---------------------------------------------------- *)

(** The attempt whose metered operation or claim an event is: it counts against P. *)
Definition counted (g : cgraph) (s : cstate) (e : cevent) : option nat :=
  match e with
  | CReserve _ node | CSettle _ _ node => cin_attempt g s node
  | CClaim v => Some v
  | _ => None
  end.

Definition allowed (g : cgraph) (P C : nat) (s : cstate) (ops : nat -> nat) (e : cevent) : Prop :=
  (forall i, counted g s e = Some i -> ops i < P)
  /\ (forall v, e = CAbandon v -> abandoned (ctl s) < C).

Definition ghost (g : cgraph) (s : cstate) (ops : nat -> nat) (e : cevent) : nat -> nat :=
  match e with
  | CBegin v => upd ops v 0
  | _ => match counted g s e with Some i => upd ops i (S (ops i)) | None => ops end
  end.

Inductive tstep (g : cgraph) (P C : nat) : cstate * (nat -> nat) -> cstate * (nat -> nat) -> Prop :=
| tstep_event s ops e s' : cstep g s e = Some s' -> allowed g P C s ops e ->
    tstep g P C (s, ops) (s', ghost g s ops e).

Inductive treachable (g : cgraph) (P C : nat) : cstate * (nat -> nat) -> Prop :=
| treach_init : treachable g P C (cinit g, fun _ => 0)
| treach_step y y' : treachable g P C y -> tstep g P C y y' -> treachable g P C y'.

(** The same for the serial model. *)
Definition scounted (g : graph) (x : state) (e : event) : option nat :=
  match e with
  | Reserve _ | Settle _ _ => in_attempt g x
  | Claim v => Some v
  | _ => None
  end.

Definition sallowed (g : graph) (P C : nat) (x : state) (ops : nat -> nat) (e : event) : Prop :=
  (forall i, scounted g x e = Some i -> ops i < P)
  /\ (forall v, e = Abandon v -> abandoned x < C).

Definition sghost (g : graph) (x : state) (ops : nat -> nat) (e : event) : nat -> nat :=
  match e with
  | Begin v => upd ops v 0
  | _ => match scounted g x e with Some i => upd ops i (S (ops i)) | None => ops end
  end.

Inductive sstep (g : graph) (P C : nat) : state * (nat -> nat) -> state * (nat -> nat) -> Prop :=
| sstep_event x ops e x' : step g x e = Some x' -> sallowed g P C x ops e ->
    sstep g P C (x, ops) (x', sghost g x ops e).

Inductive sreachable (g : graph) (P C : nat) : state * (nat -> nat) -> Prop :=
| sreach_init : sreachable g P C (init g, fun _ => 0)
| sreach_step y y' : sreachable g P C y -> sstep g P C y y' -> sreachable g P C y'.

Lemma treachable_creachable g P C y : treachable g P C y -> creachable g (fst y).
Proof. intros H. induction H as [|y y' _ IH Hs]; [constructor|].
  destruct Hs. simpl in *. econstructor; eauto. Qed.

(** ---- every event decreases the measure ------------------------------------------------------- *)

Section Decrease.
Variable g : cgraph.
Hypothesis Hg : wf (base g).
Variables P C : nat.
Notation bg := (base g).
Notation n := (size (base g)).

Lemma mu_point x x' v : v < n -> (forall j, j < n -> j <> v -> st x' j = st x j /\ atts x' j = atts x j) ->
  mu bg x' v < mu bg x v -> sum n (mu bg x') < sum n (mu bg x).
Proof.
  intros Hv H Lt. pose proof (sum_point n (mu bg x) (mu bg x') v Hv) as E.
  assert (forall j, j < n -> j <> v -> mu bg x' j = mu bg x j) as M.
  { intros j Hj Hjv. unfold mu. destruct (H j Hj Hjv) as [E1 E2]. rewrite E1, E2. auto. }
  specialize (E M). lia.
Qed.

Lemma ops_point (ops : nat -> nat) i : i < n -> ops i < P ->
  sum n (fun v => P - upd ops i (S (ops i)) v) < sum n (fun v => P - ops v).
Proof.
  intros Hi Hp. pose proof (sum_point n (fun v => P - ops v)
                              (fun v => P - upd ops i (S (ops i)) v) i Hi) as E.
  specialize (E ltac:(intros j _ Hj; unfold upd; destruct (Nat.eqb_spec j i); [lia|auto])).
  simpl in E. unfold upd in E at 2. rewrite Nat.eqb_refl in E. lia.
Qed.

Lemma end_decreases s i passed : cinv g s -> i < n -> st (ctl s) i = RUNNING ->
  sum n (mu bg (ctl (cend_attempt g s i passed))) < sum n (mu bg (ctl s)).
Proof.
  intros I Hi Hrun. apply (mu_point _ _ i Hi).
  - intros j Hj Hji. unfold cend_attempt. destruct passed; simpl; unfold upd;
      destruct (Nat.eqb_spec j i); try lia; auto.
  - unfold mu. rewrite Hrun. unfold cend_attempt.
    destruct passed; simpl; unfold upd; rewrite Nat.eqb_refl; [lia|].
    destruct (atts (ctl s) i <? attempts_of bg i); lia.
Qed.

Theorem measure_decreases s ops e s' : cinv g s -> cstep g s e = Some s' ->
  allowed g P C s ops e ->
  lex (measure bg P C (ctl s') (ghost g s ops e)) (measure bg P C (ctl s) ops).
Proof.
  intros I H [Aops Acr]. pose proof (c_range g s I) as R.
  unfold measure. destruct e; unfold cstep in H; cbv zeta in H; simpl ghost.
  - (* Begin *)
    destruct (cready g s v && cfits g s v) eqn:G; [|discriminate]. injection H as <-.
    apply andb_true_iff in G as [Hrd _]. apply cready_spec in Hrd.
    destruct Hrd as (Hv & Hl & _ & _ & Hp & _). destruct (R v Hv) as (_ & Rv & _).
    specialize (Rv Hp). simpl. apply lex_nodes. apply (mu_point _ _ v Hv).
    + intros j Hj Hjv. simpl. unfold upd. destruct (Nat.eqb_spec j v); [lia|auto].
    + unfold mu. simpl. unfold upd. rewrite Nat.eqb_refl, Hp. lia.
  - (* Refuse *)
    destruct (cready g s v && _ && _) eqn:G; [|discriminate]. injection H as <-.
    repeat rewrite andb_true_iff in G. destruct G as [[Hrd _] _]. apply cready_spec in Hrd.
    destruct Hrd as (_ & Hl & _). simpl. rewrite Hl. apply lex_live. auto.
  - (* Reserve *)
    destruct (cin_attempt g s node) as [i|] eqn:Ha; [|discriminate].
    destruct (_ && _) eqn:G; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some g s _ _ Ha) as (Hi & _).
    specialize (Aops i ltac:(simpl; auto)). simpl.
    apply lex_ops. apply ops_point; auto.
  - (* Overrun *)
    destruct (cin_attempt g s node) as [i|] eqn:Ha; [|discriminate].
    destruct (_ && _ && _) eqn:G; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some g s _ _ Ha) as (Hi & Hrun & _).
    apply lex_nodes. exact (end_decreases s i false I Hi Hrun).
  - (* Settle *)
    destruct (cin_attempt g s node) as [i|] eqn:Ha; [|discriminate].
    destruct (_ && _ && _) eqn:G; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some g s _ _ Ha) as (Hi & _).
    specialize (Aops i ltac:(simpl; auto)). simpl.
    apply lex_ops. apply ops_point; auto.
  - (* Verdict *)
    destruct (cin_attempt g s (Some v)) as [i|] eqn:Ha; [|discriminate].
    destruct (res s i <=? 0)%Z eqn:G; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some g s _ _ Ha) as (Hi & Hrun & _).
    replace (live (ctl (cend_attempt g s i passed))) with (live (ctl s))
      by (unfold cend_attempt; destruct passed; reflexivity).
    replace (repairs_used (ctl (cend_attempt g s i passed))) with (repairs_used (ctl s))
      by (unfold cend_attempt; destruct passed; reflexivity).
    replace (abandoned (ctl (cend_attempt g s i passed))) with (abandoned (ctl s))
      by (unfold cend_attempt; destruct passed; reflexivity).
    apply lex_nodes. apply end_decreases; auto.
  - (* Abandon *)
    destruct (cin_attempt g s (Some v)) as [i|] eqn:Ha; [|discriminate]. injection H as <-.
    specialize (Acr v eq_refl). simpl. apply lex_crashes. lia.
  - (* Claim *)
    destruct (cin_attempt g s (Some v)) as [i|] eqn:Ha; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some g s _ _ Ha) as (Hi & _ & _ & Hv).
    specialize (Hv v eq_refl). subst v. specialize (Aops i eq_refl).
    apply lex_ops. apply ops_point; auto.
  - (* Cancel *)
    destruct (cready g s v) eqn:G; [|discriminate]. injection H as <-.
    apply cready_spec in G. destruct G as (Hv & Hl & _ & _ & Hp & _).
    destruct (R v Hv) as (_ & Rv & _). specialize (Rv Hp).
    simpl. apply lex_nodes. apply (mu_point _ _ v Hv).
    + intros j Hj Hjv. simpl. unfold upd. destruct (Nat.eqb_spec j v); [lia|auto].
    + unfold mu. simpl. unfold upd. rewrite Nat.eqb_refl, Hp. lia.
  - (* Repair *)
    destruct (_ && _ && _ && _ && _ && _) eqn:G; [|discriminate]. injection H as <-.
    repeat rewrite andb_true_iff in G. destruct G as [[[[[_ _] _] _] Hk] _].
    apply Nat.ltb_lt in Hk. simpl. apply lex_repairs. lia.
  - (* Fail *)
    destruct (_ && _ && _ && _ && _) eqn:G; [|discriminate]. injection H as <-.
    repeat rewrite andb_true_iff in G. destruct G as [[[[Hl _] _] _] _].
    simpl. rewrite Hl. apply lex_live. auto.
  - (* Finish *)
    destruct (_ && _) eqn:G; [|discriminate]. injection H as <-.
    apply andb_true_iff in G as [Hl _]. simpl. rewrite Hl. apply lex_live. auto.
Qed.

Lemma tstep_decreases y y' : treachable g P C y -> tstep g P C y y' ->
  treachable g P C y' /\
  lex (measure bg P C (ctl (fst y')) (snd y')) (measure bg P C (ctl (fst y)) (snd y)).
Proof.
  intros Hy Hs. split; [econstructor; eauto|]. destruct Hs as [s ops e s' Hst Ha]. simpl.
  apply measure_decreases; auto.
  apply (creachable_inv g Hg). exact (treachable_creachable g P C (s, ops) Hy).
Qed.

End Decrease.

(** ---- the serial model through its instance ------------------------------------------------ *)

Lemma serial_simulated g P C y : wf g -> sreachable g P C y ->
  exists cs, treachable (par g 1) P C (cs, snd y) /\ ctl cs = fst y.
Proof.
  intros Hg H. induction H as [|y y' Hy IH Hs].
  - exists (cinit (par g 1)). split; [constructor|reflexivity].
  - destruct IH as (cs & Ht & Ec). destruct Hs as [x ops e x' Hst [Aops Acr]].
    simpl in *. subst x.
    pose proof (creachable_inv (par g 1) Hg cs (treachable_creachable _ _ _ _ Ht)) as I.
    pose proof (concurrent_runs_serial g cs Hg (treachable_creachable _ _ _ _ Ht)) as Hr.
    destruct (serial_step_concurrent g Hg 1 (le_n 1) cs I Hr e x' Hst) as (cs' & H1 & H2).
    assert (Cnt : counted (par g 1) cs (embed e) = scounted g (ctl cs) e).
    { destruct e; simpl; auto; apply (cin_attempt_none g Hg 1 cs Hr). }
    exists cs'. split; [|exact H2].
    replace (sghost g (ctl cs) ops e) with (ghost (par g 1) cs ops (embed e)).
    + econstructor; [exact Ht|]. constructor; auto. split.
      * intros i Hi. apply Aops. rewrite <- Cnt. exact Hi.
      * intros v Ev. apply (Acr v). destruct e; simpl in Ev; congruence.
    + unfold ghost, sghost. rewrite Cnt. destruct e; reflexivity.
Qed.

(** ---- the theorem --------------------------------------------------------------------------- *)

(** G1 (finishes) for every finite DAG: the lexicographic order is well founded, every event of
    the concurrent model (every max_parallel) and of the serial model decreases the measure
    from every reachable state under the two assumptions, so every run from a reachable state
    is finite ([Acc]: no infinite sequence of steps). *)
Theorem loopproof_terminates : forall g P C, wf g ->
  well_founded lex
  /\ (forall m s ops s' ops', treachable (par g m) P C (s, ops) ->
        tstep (par g m) P C (s, ops) (s', ops') ->
        lex (measure g P C (ctl s') ops') (measure g P C (ctl s) ops))
  /\ (forall m y, treachable (par g m) P C y -> Acc (fun b a => tstep (par g m) P C a b) y)
  /\ (forall x ops x' ops', sreachable g P C (x, ops) -> sstep g P C (x, ops) (x', ops') ->
        lex (measure g P C x' ops') (measure g P C x ops))
  /\ (forall y, sreachable g P C y -> Acc (fun b a => sstep g P C a b) y).
Proof.
  intros g P C Hg.
  assert (Ser : forall x ops x' ops', sreachable g P C (x, ops) ->
            sstep g P C (x, ops) (x', ops') ->
            lex (measure g P C x' ops') (measure g P C x ops)).
  { intros x ops x' ops' Hy Hs.
    destruct (serial_simulated g P C (x, ops) Hg Hy) as (cs & Ht & Ec). simpl in *. subst x.
    pose proof (creachable_inv (par g 1) Hg cs (treachable_creachable _ _ _ _ Ht)) as I.
    pose proof (concurrent_runs_serial g cs Hg (treachable_creachable _ _ _ _ Ht)) as Hr.
    inversion Hs as [x0 ops0 e x1 Hst [Aops Acr]]; subst.
    destruct (serial_step_concurrent g Hg 1 (le_n 1) cs I Hr e x' Hst) as (cs' & H1 & H2).
    assert (Cnt : counted (par g 1) cs (embed e) = scounted g (ctl cs) e).
    { destruct e; simpl; auto; apply (cin_attempt_none g Hg 1 cs Hr). }
    replace (sghost g (ctl cs) ops e) with (ghost (par g 1) cs ops (embed e))
      by (unfold ghost, sghost; rewrite Cnt; destruct e; reflexivity).
    rewrite <- H2. apply (measure_decreases (par g 1) P C cs ops (embed e) cs' I H1).
    split.
    - intros i Hi. apply Aops. rewrite <- Cnt. exact Hi.
    - intros v Ev. apply (Acr v). destruct e; simpl in Ev; congruence. }
  split; [exact lex_wf|]. split; [|split; [|split; [exact Ser|]]].
  - intros m s ops s' ops' Hy Hs.
    exact (proj2 (tstep_decreases (par g m) Hg P C (s, ops) (s', ops') Hy Hs)).
  - intros m. apply (acc_of_measure _ _ (fun y => measure g P C (ctl (fst y)) (snd y))).
    intros a b Ha Hab. exact (tstep_decreases (par g m) Hg P C a b Ha Hab).
  - apply (acc_of_measure _ _ (fun y => measure g P C (fst y) (snd y))).
    intros [x ops] [x' ops'] Ha Hab. split; [econstructor; eauto|]. simpl.
    exact (Ser x ops x' ops' Ha Hab).
Qed.
