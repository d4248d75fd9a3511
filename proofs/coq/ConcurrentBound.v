(** G1's attempt bound and G3 with several attempts in flight, for every finite DAG and every
    max_parallel: the invariant of Bound.v with "at most one attempt in flight" replaced by "at
    most max_parallel", and each attempt's own account.  The potential argument is unchanged
    because a Repair waits while a node of S_u is in flight (docs/design.md: W counts attempts,
    not time); G3 is the held bound admission promises. *)

From Coq Require Import List Arith Lia ZArith Bool.
From Loopproof Require Import Loopproof Bound Concurrent.
Import ListNotations.
Open Scope nat_scope.

(** ---- sums ---------------------------------------------------------------------------------- *)

Lemma zsum_ext n f h : (forall i, i < n -> f i = h i) -> zsum n f = zsum n h.
Proof. induction n; simpl; intros H; [auto|]. rewrite IHn by (intros; apply H; lia).
  rewrite (H n) by lia. auto. Qed.

Lemma zsum_le n f h : (forall i, i < n -> (f i <= h i)%Z) -> (zsum n f <= zsum n h)%Z.
Proof. induction n; simpl; intros H; [lia|]. specialize (IHn (fun i Hi => H i ltac:(lia))).
  specialize (H n ltac:(lia)). lia. Qed.

Lemma zsum_zero n f : (forall i, i < n -> f i = 0%Z) -> zsum n f = 0%Z.
Proof. intros H. rewrite (zsum_ext n f (fun _ => 0%Z)) by auto. induction n; simpl; auto.
  rewrite IHn by (intros; apply H; lia). lia. Qed.

(** Two functions that agree except at i: their sums differ by what they hold at i. *)
Lemma zsum_point n f h i : i < n -> (forall j, j < n -> j <> i -> h j = f j) ->
  zsum n h = (zsum n f - f i + h i)%Z.
Proof.
  induction n; simpl; intros Hi H; [lia|].
  destruct (Nat.eq_dec i n) as [->|Hne].
  - rewrite (zsum_ext n h f) by (intros j Hj; apply H; lia). lia.
  - rewrite IHn by (try lia; intros j Hj Hji; apply H; lia). rewrite (H n) by lia. lia.
Qed.

Lemma sum_point n f h i : i < n -> (forall j, j < n -> j <> i -> h j = f j) ->
  sum n h + f i = sum n f + h i.
Proof.
  induction n; simpl; intros Hi H; [lia|].
  destruct (Nat.eq_dec i n) as [->|Hne].
  - rewrite (sum_ext n h f) by (intros j Hj; apply H; lia). lia.
  - specialize (IHn ltac:(lia) (fun j Hj Hji => H j ltac:(lia) Hji)).
    rewrite (H n) by lia. lia.
Qed.

Lemma sum_ge n f i : i < n -> f i <= sum n f.
Proof. induction n; simpl; intros Hi; [lia|].
  destruct (Nat.eq_dec i n) as [->|Hne]; [lia|]. specialize (IHn ltac:(lia)). lia. Qed.

Lemma zsum_upd n f i x : i < n -> zsum n (upd f i x) = (zsum n f - f i + x)%Z.
Proof.
  intros Hi. rewrite (zsum_point n f (upd f i x) i Hi).
  - unfold upd. rewrite Nat.eqb_refl. lia.
  - intros j _ Hj. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto].
Qed.

Lemma sum_upd n f i x : i < n -> sum n (upd f i x) + f i = sum n f + x.
Proof.
  intros Hi. rewrite (sum_point n f (upd f i x) i Hi).
  - unfold upd. rewrite Nat.eqb_refl. lia.
  - intros j _ Hj. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto].
Qed.

(** ---- attempts in flight -------------------------------------------------------------------- *)

Section Flight.
Variable g : cgraph.
Notation bg := (base g).
Notation n := (size (base g)).

Lemma is_running_spec x i : is_running x i = true <-> st x i = RUNNING.
Proof. unfold is_running. apply status_eqb_eq. Qed.

Lemma nrun_none s : (forall i, i < n -> st (ctl s) i <> RUNNING) -> nrun g s = 0.
Proof.
  intros H. unfold nrun. rewrite (sum_ext _ _ (fun _ => 0)).
  - clear. generalize (size (base g)) as m. induction m; simpl; lia.
  - intros i Hi. destruct (is_running (ctl s) i) eqn:R; auto.
    apply is_running_spec in R. exfalso. exact (H i Hi R).
Qed.

Lemma nrun_ge s i : i < n -> st (ctl s) i = RUNNING -> 1 <= nrun g s.
Proof. intros Hi Hr. unfold nrun.
  pose proof (sum_ge n (fun i => if is_running (ctl s) i then 1 else 0) i Hi) as G. simpl in G.
  replace (is_running (ctl s) i) with true in G by (symmetry; apply is_running_spec; auto).
  lia. Qed.

Lemma nrun_zero s : nrun g s = 0 -> forall i, i < n -> st (ctl s) i <> RUNNING.
Proof. intros H i Hi Hr. pose proof (nrun_ge s i Hi Hr). lia. Qed.

Lemma nrun_two s i j : i < n -> j < n -> i <> j -> st (ctl s) i = RUNNING ->
  st (ctl s) j = RUNNING -> 2 <= nrun g s.
Proof.
  intros Hi Hj Hij Ri Rj. unfold nrun.
  set (f := fun k => if is_running (ctl s) k then 1 else 0).
  set (h := fun k => if Nat.eqb k i then 0 else f k).
  assert (P : sum n h + f i = sum n f + h i).
  { apply sum_point; auto. intros k _ Hk. unfold h. destruct (Nat.eqb_spec k i); [lia|auto]. }
  pose proof (sum_ge n h j Hj) as G.
  assert (Fi : f i = 1) by (unfold f; replace (is_running (ctl s) i) with true
                              by (symmetry; apply is_running_spec; auto); auto).
  assert (Hj1 : h j = 1).
  { unfold h. destruct (Nat.eqb_spec j i); [lia|]. unfold f.
    replace (is_running (ctl s) j) with true by (symmetry; apply is_running_spec; auto); auto. }
  assert (Hi0 : h i = 0) by (unfold h; rewrite Nat.eqb_refl; auto).
  lia.
Qed.

(** The count after one node's status changes. *)
Lemma nrun_point s s' v : v < n ->
  (forall j, j < n -> j <> v -> st (ctl s') j = st (ctl s) j) ->
  nrun g s' + (if is_running (ctl s) v then 1 else 0)
  = nrun g s + (if is_running (ctl s') v then 1 else 0).
Proof.
  intros Hv H. unfold nrun.
  apply (sum_point n (fun i => if is_running (ctl s) i then 1 else 0)
                     (fun i => if is_running (ctl s') i then 1 else 0) v Hv).
  intros j Hj Hjv. unfold is_running. rewrite H; auto.
Qed.

Lemma nrun_same s s' : (forall j, j < n -> is_running (ctl s') j = is_running (ctl s) j) ->
  nrun g s' = nrun g s.
Proof. intros H. unfold nrun. apply sum_ext. intros j Hj. rewrite H; auto. Qed.

Lemma cin_attempt_some s node i : cin_attempt g s node = Some i ->
  i < n /\ st (ctl s) i = RUNNING /\ live (ctl s) = true
  /\ (forall v, node = Some v -> i = v).
Proof.
  unfold cin_attempt. destruct (live (ctl s)) eqn:L; [|discriminate].
  destruct node as [v|].
  - destruct (Nat.ltb v n && is_running (ctl s) v) eqn:G; [|discriminate]. intros [= <-].
    apply andb_true_iff in G as [G1 G2]. apply Nat.ltb_lt in G1. apply is_running_spec in G2.
    repeat split; auto. intros v' [= <-]. auto.
  - destruct (Nat.eqb (nrun g s) 1); [|discriminate]. intros H.
    apply running_some in H. destruct H. repeat split; auto. discriminate.
Qed.

Lemma cready_spec s v : cready g s v = true ->
  v < n /\ live (ctl s) = true /\ nrun g s < max_parallel g
  /\ (forall i, i < n -> st (ctl s) i <> EXHAUSTED) /\ st (ctl s) v = PENDING
  /\ (forall p, In p (needs bg v) -> st (ctl s) p = DONE).
Proof.
  unfold cready. intros H. repeat rewrite andb_true_iff in H.
  destruct H as [[[[[H1 H2] H3] H4] H5] H6].
  apply Nat.ltb_lt in H1, H3. apply status_eqb_eq in H5. rewrite forallb_forall in H6.
  apply negb_true_iff in H4. unfold any_exhausted in H4.
  repeat split; auto.
  - intros i Hi He. assert (existsb (fun i => status_eqb (st (ctl s) i) EXHAUSTED)
                              (seq 0 n) = true) as C.
    { apply existsb_exists. exists i. split; [apply in_seq; lia|]. now rewrite He. }
    congruence.
  - intros p Hp. apply status_eqb_eq. auto.
Qed.

Lemma subtree_idle_spec s u : subtree_idle g s u = true ->
  forall w, w < n -> in_subtree bg u w = true -> st (ctl s) w <> RUNNING.
Proof. unfold subtree_idle. rewrite forallb_forall. intros H w Hw Hin Hr.
  specialize (H w ltac:(apply in_seq; lia)). rewrite Hin in H.
  replace (is_running (ctl s) w) with true in H by (symmetry; apply is_running_spec; auto).
  discriminate. Qed.

End Flight.

(** ---- the invariant ------------------------------------------------------------------------- *)

Section Inv.
Variable g : cgraph.
Hypothesis Hg : wf (base g).
Notation bg := (base g).
Notation n := (size (base g)).

(** G1's structural facts with up to max_parallel attempts in flight, its potential, and G3:
    each attempt's account within its c_v, nothing held by a node not in flight, the totals
    the sums of the accounts, and the held bound. *)
Record cinv (s : cstate) : Prop := {
  c_range : forall i, i < n -> atts (ctl s) i <= attempts_of bg i
            /\ (st (ctl s) i = PENDING -> atts (ctl s) i < attempts_of bg i)
            /\ (st (ctl s) i = RUNNING -> 1 <= atts (ctl s) i);
  c_flight : nrun g s <= max_parallel g;
  c_total : sum n (atts (ctl s)) <= total (ctl s);
  c_started : forall v w, w < n -> started (ctl s) w -> anc bg v w -> st (ctl s) v = DONE;
  c_repairs : repairs_used (ctl s) <= repair_budget bg;
  c_potential : potential_ok bg (ctl s);
  c_settled : (0 <= settled (ctl s))%Z;
  c_accounts : forall i, i < n ->
    (st (ctl s) i = RUNNING -> 0 <= res s i <= spt s i /\ spt s i <= ceiling bg i)%Z
    /\ (st (ctl s) i <> RUNNING -> res s i = 0%Z /\ spt s i = 0%Z);
  c_totals : reserved (ctl s) = zsum n (res s) /\ attempt_spend (ctl s) = zsum n (spt s);
  c_committed : forall b, spend_budget bg = Some b -> (committed g s <= b)%Z
}.

Lemma cinv_init : cinv (cinit g).
Proof.
  constructor; simpl.
  - intros i Hi. pose proof (wf_attempts _ Hg i Hi). repeat split; intros; try lia.
    discriminate.
  - rewrite nrun_none; [lia|]. simpl. discriminate.
  - generalize (size (base g)) as m. induction m; simpl; lia.
  - intros v w _ [H|H]; simpl in H; [congruence|lia].
  - lia.
  - unfold potential_ok, rem; simpl. rewrite (sum_ext _ _ (attempts_of bg)) by (intros; lia).
    lia.
  - lia.
  - intros i Hi. split; [discriminate|auto].
  - split; symmetry; apply zsum_zero; auto.
  - intros b Hb. unfold committed. simpl. rewrite zsum_zero by auto.
    pose proof (wf_budget _ Hg b Hb). lia.
Qed.

(** held (what Begin reads) is the committed spend on every state of the invariant. *)
Lemma held_committed s : cinv s -> held g s = committed g s.
Proof.
  intros I. unfold held, committed. f_equal. apply zsum_ext. intros w Hw.
  destruct (c_accounts s I w Hw) as [A1 A2]. destruct (is_running (ctl s) w) eqn:R.
  - lia.
  - rewrite (proj1 (A2 ltac:(intros E; apply is_running_spec in E; congruence))). lia.
Qed.

(** The open reservations are at most what is committed. *)
Lemma reserved_le_committed s : cinv s ->
  (settled (ctl s) + reserved (ctl s) <= committed g s)%Z.
Proof.
  intros I. rewrite (proj1 (c_totals s I)). unfold committed.
  enough (zsum n (res s) <= zsum n (fun w => res s w + if is_running (ctl s) w
                                   then ceiling bg w - spt s w else 0))%Z by lia.
  apply zsum_le. intros w Hw. destruct (is_running (ctl s) w) eqn:R; [|lia].
  apply is_running_spec in R. destruct (c_accounts s I w Hw) as [A _]. specialize (A R). lia.
Qed.

Lemma cready_ancestors s v : cinv s -> cready g s v = true ->
  forall x, anc bg x v -> st (ctl s) x = DONE.
Proof.
  intros I Hr x Hx. apply cready_spec in Hr. destruct Hr as (Hv & _ & _ & _ & _ & Hn).
  inversion Hx; subst; auto.
  pose proof (wf_needs _ Hg v p Hv H). apply (c_started s I x p); [lia| |auto].
  left. rewrite (Hn p H). discriminate.
Qed.

(** A change of one node's status and counter keeps the potential when that node's term does
    not grow. *)
Lemma pot_point x x' v : v < n ->
  (forall j, j < n -> j <> v -> rem bg x' j = rem bg x j) ->
  total x' + rem bg x' v <= total x + rem bg x v -> repairs_used x' = repairs_used x ->
  potential_ok bg x -> potential_ok bg x'.
Proof.
  intros Hv H Ht Hr P. unfold potential_ok in *.
  pose proof (sum_point n (rem bg x) (rem bg x') v Hv H). rewrite Hr. lia.
Qed.

(** The committed spend after one node's account and status change. *)
Lemma committed_point s s' v : v < n ->
  (forall j, j < n -> j <> v -> st (ctl s') j = st (ctl s) j /\ res s' j = res s j
                                /\ spt s' j = spt s j) ->
  committed g s' = (committed g s - settled (ctl s)
     - (res s v + if is_running (ctl s) v then ceiling bg v - spt s v else 0)
     + settled (ctl s') + (res s' v + if is_running (ctl s') v then ceiling bg v - spt s' v
                                      else 0))%Z.
Proof.
  intros Hv H. unfold committed.
  rewrite (zsum_point n (fun w => res s w + if is_running (ctl s) w
                                  then ceiling bg w - spt s w else 0)%Z
                        (fun w => res s' w + if is_running (ctl s') w
                                  then ceiling bg w - spt s' w else 0)%Z v Hv); [lia|].
  intros j Hj Hjv. destruct (H j Hj Hjv) as (E1 & E2 & E3). unfold is_running.
  rewrite E1, E2, E3. auto.
Qed.

Ltac z_of := repeat match goal with
  | H : (_ <=? _)%Z = true |- _ => apply Z.leb_le in H
  | H : (_ <=? _)%Z = false |- _ => apply Z.leb_gt in H
  | H : _ && _ = true |- _ => apply andb_true_iff in H as [? ?]
  end.

Ltac proj_simpl := cbn [ctl res spt st act atts passes cancelled repairs_used total abandoned
                        settled reserved attempt_spend outc with_ctl with_outcome] in *.

(** An attempt ends (Verdict, Overrun): its account leaves, its node is no longer in flight. *)
Lemma cinv_end s i passed : cinv s -> i < n -> st (ctl s) i = RUNNING -> res s i = 0%Z ->
  cinv (cend_attempt g s i passed).
Proof.
  intros I Hi Hrun Hres0. destruct I as [R F T J U P Se A Tt Cm]. unfold started in J.
  destruct (R i Hi) as (Ri1 & Ri2 & Ri3). destruct (A i Hi) as [Ai _]. specialize (Ai Hrun).
  assert (Gen : forall y ps,
    (y = PENDING -> atts (ctl s) i < attempts_of bg i) -> y <> RUNNING ->
    cinv (mkC (mkState (upd (st (ctl s)) i y) (act (ctl s)) (atts (ctl s)) ps (cancelled (ctl s))
                 (repairs_used (ctl s)) (total (ctl s)) (abandoned (ctl s)) (settled (ctl s))
                 (reserved (ctl s) - res s i)%Z (attempt_spend (ctl s) - spt s i)%Z
                 (outc (ctl s)))
              (upd (res s) i 0%Z) (upd (spt s) i 0%Z))).
  { intros y ps Hy Hyr.
    set (s' := mkC _ _ _).
    assert (Oth : forall j, j < n -> j <> i -> st (ctl s') j = st (ctl s) j
                  /\ res s' j = res s j /\ spt s' j = spt s j).
    { intros j Hj Hji. simpl. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto]. }
    assert (Si : st (ctl s') i = y) by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
    assert (Ri : res s' i = 0%Z /\ spt s' i = 0%Z)
      by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
    constructor.
    - intros j Hj. simpl. unfold upd. destruct (Nat.eqb_spec j i) as [->|]; [|auto].
      repeat split; auto; intros E; congruence.
    - pose proof (nrun_point g s s' i Hi (fun j Hj Hji => proj1 (Oth j Hj Hji))) as E.
      unfold is_running in E. rewrite Si, Hrun in E. simpl in E.
      destruct (status_eqb y RUNNING) eqn:Y; [apply status_eqb_eq in Y; congruence|]. lia.
    - simpl. auto.
    - intros v w Hw Hs Hvw. unfold started, s' in Hs. unfold s'. simpl in Hs |- *.
      unfold upd in Hs |- *.
      assert (st (ctl s) v = DONE).
      { apply (J v w Hw); auto. eqcase w i; [left; congruence|auto]. }
      eqcase v i; [congruence|auto].
    - simpl. auto.
    - apply (pot_point (ctl s) (ctl s') i Hi).
      + intros j Hj Hji. unfold rem. simpl. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto].
      + unfold rem. simpl. unfold upd. rewrite Nat.eqb_refl, Hrun. destruct y; lia.
      + auto.
      + auto.
    - simpl. auto.
    - intros j Hj. destruct (Nat.eq_dec j i) as [->|Hji].
      + rewrite Si, (proj1 Ri), (proj2 Ri). split; [congruence|auto].
      + destruct (Oth j Hj Hji) as (E1 & E2 & E3). rewrite E1, E2, E3. apply A; auto.
    - simpl. destruct Tt as [T1 T2]. split.
      + rewrite zsum_upd by auto. lia.
      + rewrite zsum_upd by auto. lia.
    - intros b Hb. specialize (Cm b Hb).
      rewrite (committed_point s s' i Hi Oth). rewrite (proj1 Ri), (proj2 Ri).
      unfold is_running at 2. rewrite Si.
      destruct (status_eqb y RUNNING) eqn:Y; [apply status_eqb_eq in Y; congruence|].
      unfold is_running. rewrite Hrun. simpl. lia. }
  unfold cend_attempt. destruct passed.
  - apply Gen; discriminate.
  - apply Gen; [|destruct (atts (ctl s) i <? attempts_of bg i); discriminate].
    destruct (Nat.ltb_spec (atts (ctl s) i) (attempts_of bg i)); [auto|discriminate].
Qed.

Lemma cinv_begin s v s' : cinv s -> cstep g s (CBegin v) = Some s' -> cinv s'.
Proof.
  intros I H. unfold cstep in H.
  destruct (cready g s v && cfits g s v) eqn:G; [|discriminate]. injection H as <-.
  unfold begin_effect; cbv zeta.
  apply andb_true_iff in G as [Hrd Hfit].
  pose proof (cready_ancestors s v I Hrd) as Anc.
  pose proof (held_committed s I) as HC.
  apply cready_spec in Hrd. destruct Hrd as (Hv & _ & Hm & NoX & Hp & _).
  destruct I as [R F T J U P Se A Tt Cm]. unfold started in J.
  destruct (R v Hv) as (Rv1 & Rv2 & Rv3). specialize (Rv2 Hp).
  destruct (A v Hv) as [_ Av]. destruct (Av ltac:(congruence)) as [Res0 Spt0].
  set (s' := mkC _ _ _).
  assert (Oth : forall j, j < n -> j <> v -> st (ctl s') j = st (ctl s) j
                /\ res s' j = res s j /\ spt s' j = spt s j).
  { intros j Hj Hjv. simpl. unfold upd. destruct (Nat.eqb_spec j v); [lia|auto]. }
  assert (Sv : st (ctl s') v = RUNNING) by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
  assert (Rv : res s' v = 0%Z /\ spt s' v = 0%Z)
    by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
  pose proof (nrun_point g s s' v Hv (fun j Hj Hji => proj1 (Oth j Hj Hji))) as E.
  unfold is_running in E. rewrite Sv, Hp in E. simpl in E.
  constructor.
  - intros i Hi. simpl. unfold upd. destruct (Nat.eqb_spec i v) as [->|]; [|auto].
    repeat split; intros; try lia; discriminate.
  - lia.
  - simpl. pose proof (sum_point n (atts (ctl s)) (upd (atts (ctl s)) v (S (atts (ctl s) v)))
                         v Hv) as Q.
    specialize (Q ltac:(intros j _ Hj; unfold upd; destruct (Nat.eqb_spec j v); [lia|auto])).
    unfold upd in Q at 2. rewrite Nat.eqb_refl in Q. lia.
  - intros x w Hw Hs Hx. unfold started, s' in Hs. unfold s'. simpl in Hs |- *.
    unfold upd in Hs |- *.
    pose proof (anc_lt _ x w Hg Hw Hx). eqcase w v.
    + eqcase x v; [lia|]. apply Anc. auto.
    + assert (st (ctl s) x = DONE) by (apply (J x w); auto). eqcase x v; [congruence|auto].
  - simpl. auto.
  - apply (pot_point (ctl s) (ctl s') v Hv).
    + intros j Hj Hjv. unfold rem. simpl. unfold upd. destruct (Nat.eqb_spec j v); [lia|auto].
    + unfold rem. simpl. unfold upd. rewrite Nat.eqb_refl, Hp. lia.
    + auto.
    + auto.
  - simpl. auto.
  - intros j Hj. destruct (Nat.eq_dec j v) as [->|Hjv].
    + rewrite Sv, (proj1 Rv), (proj2 Rv). pose proof (wf_ceilings _ Hg v Hv).
      split; [intros; lia|congruence].
    + destruct (Oth j Hj Hjv) as (E1 & E2 & E3). rewrite E1, E2, E3. apply A; auto.
  - simpl. destruct Tt as [T1 T2]. split.
    + rewrite zsum_upd by auto. lia.
    + destruct (Nat.eqb_spec (nrun g s) 0) as [E0|E0].
      * symmetry. apply zsum_zero. intros j Hj. unfold upd.
        destruct (Nat.eqb_spec j v); auto. apply A; auto. apply (nrun_zero g s E0 j Hj).
      * rewrite zsum_upd by auto. lia.
  - intros b Hb. unfold cfits in Hfit. rewrite Hb in Hfit. apply Z.leb_le in Hfit.
    rewrite (committed_point s s' v Hv Oth), (proj1 Rv), (proj2 Rv).
    unfold is_running. rewrite Sv, Hp. simpl. rewrite Res0. lia.
Qed.

Lemma cinv_abandon s v s' : cinv s -> cstep g s (CAbandon v) = Some s' -> cinv s'.
Proof.
  intros I H. unfold cstep in H. destruct (cin_attempt g s (Some v)) as [i|] eqn:Ha;
    [|discriminate]. injection H as <-.
  apply cin_attempt_some in Ha. destruct Ha as (Hi & Hrun & _).
  destruct I as [R F T J U P Se A Tt Cm]. unfold started in J.
  destruct (R i Hi) as (Ri1 & Ri2 & Ri3). specialize (Ri3 Hrun).
  destruct (A i Hi) as [Ai _]. specialize (Ai Hrun).
  set (s' := mkC _ _ _).
  assert (Oth : forall j, j < n -> j <> i -> st (ctl s') j = st (ctl s) j
                /\ res s' j = res s j /\ spt s' j = spt s j).
  { intros j Hj Hji. simpl. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto]. }
  assert (Si : st (ctl s') i = PENDING) by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
  assert (Ri : res s' i = 0%Z /\ spt s' i = 0%Z)
    by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
  pose proof (sum_point n (atts (ctl s)) (upd (atts (ctl s)) i (pred (atts (ctl s) i))) i Hi)
    as Q.
  specialize (Q ltac:(intros j _ Hj; unfold upd; destruct (Nat.eqb_spec j i); [lia|auto])).
  unfold upd in Q at 2. rewrite Nat.eqb_refl in Q.
  pose proof (sum_ge n (atts (ctl s)) i Hi).
  constructor.
  - intros j Hj. simpl. unfold upd. destruct (Nat.eqb_spec j i) as [->|]; [|auto].
    repeat split; intros; try lia; discriminate.
  - pose proof (nrun_point g s s' i Hi (fun j Hj Hji => proj1 (Oth j Hj Hji))) as E.
    unfold is_running in E. rewrite Si, Hrun in E. simpl in E. lia.
  - simpl. lia.
  - intros x w Hw Hs Hx. unfold started, s' in Hs. unfold s'. simpl in Hs |- *.
    unfold upd in Hs |- *.
    assert (st (ctl s) x = DONE).
    { apply (J x w Hw); auto. eqcase w i; [left; congruence|auto]. }
    eqcase x i; [congruence|auto].
  - simpl. auto.
  - apply (pot_point (ctl s) (ctl s') i Hi).
    + intros j Hj Hji. unfold rem. simpl. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto].
    + unfold rem. simpl. unfold upd. rewrite Nat.eqb_refl, Hrun. lia.
    + auto.
    + auto.
  - simpl. lia.
  - intros j Hj. destruct (Nat.eq_dec j i) as [->|Hji].
    + rewrite Si, (proj1 Ri), (proj2 Ri). split; [discriminate|auto].
    + destruct (Oth j Hj Hji) as (E1 & E2 & E3). rewrite E1, E2, E3. apply A; auto.
  - simpl. destruct Tt as [T1 T2]. split.
    + rewrite zsum_upd by auto. lia.
    + rewrite zsum_upd by auto. lia.
  - intros b Hb. specialize (Cm b Hb).
    rewrite (committed_point s s' i Hi Oth), (proj1 Ri), (proj2 Ri).
    unfold is_running. rewrite Si, Hrun. simpl. lia.
Qed.

Lemma cinv_cancel s v s' : cinv s -> cstep g s (CCancel v) = Some s' -> cinv s'.
Proof.
  intros I H. unfold cstep in H.
  destruct (cready g s v) eqn:Hrd; [|discriminate]. injection H as <-.
  pose proof (cready_ancestors s v I Hrd) as Anc.
  apply cready_spec in Hrd. destruct Hrd as (Hv & _ & Hm & NoX & Hp & _).
  destruct I as [R F T J U P Se A Tt Cm]. unfold started in J.
  destruct (R v Hv) as (Rv1 & Rv2 & Rv3). specialize (Rv2 Hp).
  set (s' := with_ctl s _).
  assert (Run : forall j, j < n -> is_running (ctl s') j = is_running (ctl s) j).
  { intros j Hj. unfold is_running. simpl. unfold upd.
    destruct (Nat.eqb_spec j v) as [->|]; [rewrite Hp|]; auto. }
  constructor.
  - intros i Hi. simpl. unfold upd. destruct (Nat.eqb_spec i v) as [->|]; [|auto].
    repeat split; intros; try lia; discriminate.
  - rewrite (nrun_same g s s' Run). auto.
  - simpl. auto.
  - intros x w Hw Hs Hx. unfold started, s' in Hs. unfold s'. simpl in Hs |- *.
    unfold upd in Hs |- *.
    pose proof (anc_lt _ x w Hg Hw Hx). eqcase w v.
    + eqcase x v; [lia|]. apply Anc. auto.
    + assert (st (ctl s) x = DONE) by (apply (J x w); auto). eqcase x v; [congruence|auto].
  - simpl. auto.
  - apply (pot_point (ctl s) (ctl s') v Hv).
    + intros j Hj Hjv. unfold rem. simpl. unfold upd. destruct (Nat.eqb_spec j v); [lia|auto].
    + unfold rem. simpl. unfold upd. rewrite Nat.eqb_refl, Hp. lia.
    + auto.
    + auto.
  - simpl. auto.
  - intros j Hj. simpl. unfold upd. destruct (Nat.eqb_spec j v) as [->|]; [|apply A; auto].
    destruct (A v Hv) as [_ Av]. rewrite Hp in Av. split; [discriminate|]. intros _.
    apply Av. discriminate.
  - simpl. auto.
  - intros b Hb. specialize (Cm b Hb). unfold committed in *. simpl.
    rewrite (zsum_ext n _ (fun w => res s w + if is_running (ctl s) w
                                   then ceiling bg w - spt s w else 0)%Z); [lia|].
    intros w Hw. rewrite <- (Run w Hw). auto.
Qed.

Lemma cinv_repair s d u s' : cinv s -> cstep g s (CRepair d u) = Some s' -> cinv s'.
Proof.
  intros I H. unfold cstep in H.
  destruct (live (ctl s) && (d <? n) && existsb (Nat.eqb u) (repairs bg d)
            && status_eqb (st (ctl s) d) EXHAUSTED && (repairs_used (ctl s) <? repair_budget bg)
            && subtree_idle g s u) eqn:G; [|discriminate]. injection H as <-.
  unfold repair_effect; cbv zeta.
  repeat rewrite andb_true_iff in G. destruct G as [[[[[_ Hd] Hu] Hx] Hk] Hidle].
  apply Nat.ltb_lt in Hd, Hk. apply status_eqb_eq in Hx.
  apply existsb_exists in Hu. destruct Hu as (u' & Hu & Heq). apply Nat.eqb_eq in Heq. subst u'.
  pose proof (subtree_idle_spec g s u Hidle) as Idle.
  destruct I as [R F T J U P Se A Tt Cm]. unfold started in J.
  assert (Sub : forall v w, w < n -> anc bg v w -> in_subtree bg u v = true ->
                in_subtree bg u w = true).
  { intros v w Hw Hvw Hv. pose proof (anc_lt _ v w Hg Hw Hvw).
    apply (in_subtree_spec _ u v Hg ltac:(lia)) in Hv. apply in_subtree_spec; auto. right.
    destruct Hv as [->|Hv]; auto. eapply anc_trans; eauto. }
  set (s' := with_ctl s _).
  assert (Run : forall j, j < n -> is_running (ctl s') j = is_running (ctl s) j).
  { intros j Hj. unfold is_running. simpl. destruct (in_subtree bg u j) eqn:Hin; auto.
    destruct (status_eqb (st (ctl s) j) RUNNING) eqn:E; auto.
    apply status_eqb_eq in E. exfalso. exact (Idle j Hj Hin E). }
  constructor.
  - intros i Hi. simpl. destruct (in_subtree bg u i).
    + pose proof (wf_attempts _ Hg i Hi). repeat split; intros; try lia; discriminate.
    + auto.
  - rewrite (nrun_same g s s' Run). auto.
  - simpl. eapply Nat.le_trans; [|exact T]. apply sum_le. intros i _.
    destruct (in_subtree bg u i); lia.
  - intros v w Hw Hs Hvw. unfold started, s' in Hs. unfold s'. simpl in Hs |- *.
    destruct (in_subtree bg u w) eqn:Hw'.
    + destruct Hs as [Hs|Hs]; [congruence|lia].
    + destruct (in_subtree bg u v) eqn:Hv.
      * rewrite (Sub v w Hw Hvw Hv) in Hw'. discriminate.
      * apply (J v w); auto.
  - simpl. lia.
  - unfold potential_ok, rem in *; simpl.
    assert (sum n (fun w => match (if in_subtree bg u w then PENDING else st (ctl s) w) with
              | DONE | EXHAUSTED => 0
              | _ => attempts_of bg w - (if in_subtree bg u w then 0 else atts (ctl s) w) end)
            <= sum n (fun j => match st (ctl s) j with
              | DONE | EXHAUSTED => 0 | _ => attempts_of bg j - atts (ctl s) j end)
               + weight bg (d, u)).
    { unfold weight. apply sum_le_add. intros w Hw.
      destruct (in_subtree bg u w) eqn:Hin; simpl; [|lia].
      destruct (ancb bg d w) eqn:Hdw; simpl; [|lia].
      apply ancb_spec in Hdw; auto.
      destruct (st (ctl s) w) eqn:Hsw.
      - destruct (atts (ctl s) w) eqn:Ha; [lia|].
        exfalso. assert (st (ctl s) d = DONE) by (apply (J d w Hw); auto; right; lia).
        congruence.
      - exfalso. assert (st (ctl s) d = DONE) by (apply (J d w Hw); auto; left; congruence).
        congruence.
      - exfalso. assert (st (ctl s) d = DONE) by (apply (J d w Hw); auto; left; congruence).
        congruence.
      - exfalso. assert (st (ctl s) d = DONE) by (apply (J d w Hw); auto; left; congruence).
        congruence. }
    assert (weight bg (d, u) <= max_weight bg) by (apply weight_le_max, in_pairs; auto).
    nia.
  - simpl. auto.
  - intros j Hj. simpl. destruct (in_subtree bg u j) eqn:Hin; [|apply A; auto].
    split; [discriminate|]. intros _. apply A; auto.
  - simpl. auto.
  - intros b Hb. specialize (Cm b Hb). unfold committed in *. simpl.
    rewrite (zsum_ext n _ (fun w => res s w + if is_running (ctl s) w
                                   then ceiling bg w - spt s w else 0)%Z); [lia|].
    intros w Hw. rewrite <- (Run w Hw). auto.
Qed.

(** Refuse, Fail, Finish: only the outcome changes. *)
Lemma cinv_outcome s o : cinv s -> cinv (with_ctl s (with_outcome (ctl s) o)).
Proof. intros [R F T J U P Se A Tt Cm]. constructor; auto. Qed.

Lemma cinv_step s e s' : cinv s -> cstep g s e = Some s' -> cinv s'.
Proof.
  intros I H. destruct e.
  - eapply cinv_begin; eauto.
  - unfold cstep in H. destruct (_ && _ && _); [|discriminate]. injection H as <-.
    apply cinv_outcome; auto.
  - (* Reserve *)
    unfold cstep in H. destruct (cin_attempt g s node) as [i|] eqn:Ha; [|discriminate].
    destruct ((0 <=? amount)%Z && creservation_fits g s i amount) eqn:G; [|discriminate].
    injection H as <-. unfold reserve_effect; cbv zeta.
    apply cin_attempt_some in Ha. destruct Ha as (Hi & Hrun & _).
    unfold creservation_fits in G. z_of.
    destruct I as [R F T J U P Se A Tt Cm]. unfold started in J.
    destruct (A i Hi) as [Ai _]. specialize (Ai Hrun).
    set (s' := mkC _ _ _).
    assert (Oth : forall j, j < n -> j <> i -> st (ctl s') j = st (ctl s) j
                  /\ res s' j = res s j /\ spt s' j = spt s j).
    { intros j Hj Hji. simpl. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto]. }
    assert (Ri : res s' i = (res s i + amount)%Z /\ spt s' i = (spt s i + amount)%Z)
      by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
    constructor; auto.
    + intros j Hj. destruct (Nat.eq_dec j i) as [->|Hji].
      * simpl st. rewrite (proj1 Ri), (proj2 Ri). split; [intros; lia|congruence].
      * destruct (Oth j Hj Hji) as (E1 & E2 & E3). rewrite E1, E2, E3. apply A; auto.
    + simpl. destruct Tt as [T1 T2]. split.
      * rewrite zsum_upd by auto. lia.
      * rewrite zsum_upd by auto. lia.
    + intros b Hb. specialize (Cm b Hb).
      rewrite (committed_point s s' i Hi Oth), (proj1 Ri), (proj2 Ri).
      unfold is_running. simpl. rewrite Hrun. simpl. lia.
  - (* Overrun *)
    unfold cstep in H. destruct (cin_attempt g s node) as [i|] eqn:Ha; [|discriminate].
    destruct (_ && _ && _) eqn:G; [|discriminate]. injection H as <-.
    apply cin_attempt_some in Ha. destruct Ha as (Hi & Hrun & _). z_of.
    destruct (c_accounts s I i Hi) as [Ai _]. specialize (Ai Hrun).
    exact (cinv_end s i false I Hi Hrun ltac:(lia)).
  - (* Settle *)
    unfold cstep in H. destruct (cin_attempt g s node) as [i|] eqn:Ha; [|discriminate].
    destruct (match of with None => true | Some o => (0 <=? o)%Z && (o <=? res s i)%Z end
              && (0 <=? amount)%Z && (amount <=? match of with None => res s i
                                                      | Some o => o end)%Z) eqn:G;
      [|discriminate].
    injection H as <-. apply cin_attempt_some in Ha. destruct Ha as (Hi & Hrun & _).
    destruct I as [R F T J U P Se A Tt Cm]. unfold started in J.
    destruct (A i Hi) as [Ai _]. specialize (Ai Hrun).
    set (rel := match of with None => res s i | Some o => o end) in *.
    assert (Rel : (0 <= rel <= res s i)%Z /\ (0 <= amount <= rel)%Z).
    { repeat rewrite andb_true_iff in G. destruct G as [[G1 G2] G3].
      apply Z.leb_le in G2, G3. unfold rel in *. destruct of as [o|]; [|lia].
      apply andb_true_iff in G1 as [G1 G1']. apply Z.leb_le in G1, G1'. lia. }
    set (s' := mkC _ _ _).
    assert (Oth : forall j, j < n -> j <> i -> st (ctl s') j = st (ctl s) j
                  /\ res s' j = res s j /\ spt s' j = spt s j).
    { intros j Hj Hji. simpl. unfold upd. destruct (Nat.eqb_spec j i); [lia|auto]. }
    assert (Ri : res s' i = (res s i - rel)%Z /\ spt s' i = (spt s i - rel + amount)%Z)
      by (simpl; unfold upd; rewrite Nat.eqb_refl; auto).
    constructor; auto.
    + simpl. lia.
    + intros j Hj. destruct (Nat.eq_dec j i) as [->|Hji].
      * simpl st. rewrite (proj1 Ri), (proj2 Ri). split; [intros; lia|congruence].
      * destruct (Oth j Hj Hji) as (E1 & E2 & E3). rewrite E1, E2, E3. apply A; auto.
    + simpl. destruct Tt as [T1 T2]. split.
      * rewrite zsum_upd by auto. lia.
      * rewrite zsum_upd by auto. lia.
    + intros b Hb. specialize (Cm b Hb).
      rewrite (committed_point s s' i Hi Oth), (proj1 Ri), (proj2 Ri).
      unfold is_running. simpl. rewrite Hrun. simpl. lia.
  - (* Verdict *)
    unfold cstep in H. destruct (cin_attempt g s (Some v)) as [i|] eqn:Ha; [|discriminate].
    destruct (res s i <=? 0)%Z eqn:G; [|discriminate]. injection H as <-.
    apply cin_attempt_some in Ha. destruct Ha as (Hi & Hrun & _). z_of.
    destruct (c_accounts s I i Hi) as [Ai _]. specialize (Ai Hrun).
    apply cinv_end; auto. lia.
  - eapply cinv_abandon; eauto.
  - unfold cstep in H. destruct (cin_attempt g s (Some v)); [|discriminate].
    injection H as <-. auto.
  - eapply cinv_cancel; eauto.
  - eapply cinv_repair; eauto.
  - unfold cstep in H. destruct (_ && _ && _ && _ && _); [|discriminate]. injection H as <-.
    apply cinv_outcome; auto.
  - unfold cstep in H. destruct (_ && _); [|discriminate]. injection H as <-.
    apply cinv_outcome; auto.
Qed.

Lemma creachable_inv s : creachable g s -> cinv s.
Proof. intros H. induction H; [apply cinv_init|]. eapply cinv_step; eauto. Qed.

End Inv.

(** ---- the theorems -------------------------------------------------------------------------- *)

(** G1 with several attempts in flight: for every well-formed graph and every max_parallel,
    every reachable state has attempts_total <= W, at most max_parallel attempts in flight,
    and the structural facts of the serial model. *)
Theorem loopproof_W_bound_concurrent : forall g s, wf (base g) -> creachable g s ->
  total (ctl s) <= W (base g)
  /\ nrun g s <= max_parallel g
  /\ (forall i, i < size (base g) -> atts (ctl s) i <= attempts_of (base g) i)
  /\ (forall v w, w < size (base g) -> started (ctl s) w -> anc (base g) v w ->
                  st (ctl s) v = DONE)
  /\ repairs_used (ctl s) <= repair_budget (base g).
Proof.
  intros g s Hg H. pose proof (creachable_inv g Hg s H) as I.
  pose proof (c_potential g s I) as P. pose proof (c_repairs g s I) as U.
  unfold potential_ok, W in *.
  assert (repairs_used (ctl s) * max_weight (base g)
          <= repair_budget (base g) * max_weight (base g)) by (apply Nat.mul_le_mono_r; auto).
  repeat split; try lia.
  - apply (c_flight g s I).
  - intros i Hi. apply (c_range g s I i Hi).
  - apply (c_started g s I).
Qed.

(** G3 with several attempts in flight: on every reachable state of every well-formed graph and
    every max_parallel, nothing settled is negative; every attempt in flight holds
    0 <= reserved <= spent <= c_v of its node and a node not in flight holds nothing; the totals
    are the sums of the accounts; and, for a finite B, settled + every open reservation <= B and
    the held bound admission promises, settled + the sum over the attempts in flight of
    (c_w - settled_w), is at most B -- [held], which Begin reads, equal to [committed], the
    same sum counted with every open reservation of any node. *)
Theorem loopproof_G3_concurrent : forall g s, wf (base g) -> creachable g s ->
  (0 <= settled (ctl s))%Z
  /\ (forall i, i < size (base g) ->
        (st (ctl s) i = RUNNING -> 0 <= res s i <= spt s i /\ spt s i <= ceiling (base g) i)%Z
        /\ (st (ctl s) i <> RUNNING -> res s i = 0%Z /\ spt s i = 0%Z))
  /\ reserved (ctl s) = zsum (size (base g)) (res s)
  /\ attempt_spend (ctl s) = zsum (size (base g)) (spt s)
  /\ held g s = committed g s
  /\ forall b, spend_budget (base g) = Some b ->
       (settled (ctl s) + reserved (ctl s) <= b)%Z /\ (held g s <= b)%Z
       /\ (committed g s <= b)%Z.
Proof.
  intros g s Hg H. pose proof (creachable_inv g Hg s H) as I.
  pose proof (held_committed g s I) as HC. pose proof (reserved_le_committed g s I) as RC.
  split; [apply (c_settled g s I)|].
  split; [intros i Hi; apply (c_accounts g s I i Hi)|].
  split; [apply (c_totals g s I)|].
  split; [apply (c_totals g s I)|].
  split; [exact HC|].
  intros b Hb. pose proof (c_committed g s I b Hb). repeat split; lia.
Qed.
