(** G1's attempt bound W, its structural facts and G3's spend invariant, for every finite DAG:
    the potential argument of docs/proofs.md, with the finite sums over nodes as [sum]. *)

From Coq Require Import List Arith Lia ZArith Bool.
From Loopproof Require Import Loopproof.
Import ListNotations.
Open Scope nat_scope.

(** ---- sums ---------------------------------------------------------------------------------- *)

Lemma sum_le n f h : (forall i, i < n -> f i <= h i) -> sum n f <= sum n h.
Proof. induction n; simpl; intros H; [lia|]. specialize (IHn (fun i Hi => H i ltac:(lia))).
  specialize (H n ltac:(lia)). lia. Qed.

Lemma sum_ext n f h : (forall i, i < n -> f i = h i) -> sum n f = sum n h.
Proof. induction n; simpl; intros H; [lia|]. rewrite IHn by (intros; apply H; lia).
  rewrite (H n) by lia. lia. Qed.

Lemma sum_le_add n f h k : (forall i, i < n -> f i <= h i + k i) -> sum n f <= sum n h + sum n k.
Proof. induction n; simpl; intros H; [lia|]. specialize (IHn (fun i Hi => H i ltac:(lia))).
  specialize (H n ltac:(lia)). lia. Qed.

Lemma sum_point_down n f h i k : i < n ->
  (forall j, j < n -> f j + (if Nat.eqb j i then k else 0) <= h j) -> sum n f + k <= sum n h.
Proof.
  induction n; simpl; intros Hi H; [lia|].
  destruct (Nat.eq_dec i n) as [->|Hne].
  - assert (sum n f <= sum n h).
    { apply sum_le. intros j Hj. specialize (H j ltac:(lia)).
      destruct (Nat.eqb_spec j n); lia. }
    specialize (H n ltac:(lia)). rewrite Nat.eqb_refl in H. lia.
  - assert (sum n f + k <= sum n h) by (apply IHn; [lia| intros j Hj; apply H; lia]).
    specialize (H n ltac:(lia)). destruct (Nat.eqb_spec n i); [lia|]. lia.
Qed.

Lemma sum_point_up n f h i k :
  (forall j, j < n -> f j <= h j + (if Nat.eqb j i then k else 0)) -> sum n f <= sum n h + k.
Proof.
  induction n; simpl; intros H; [lia|].
  destruct (Nat.eqb_spec n i) as [->|Hne].
  - assert (sum i f <= sum i h).
    { apply sum_le. intros j Hj. specialize (H j ltac:(lia)).
      destruct (Nat.eqb_spec j i); lia. }
    specialize (H i ltac:(lia)). rewrite Nat.eqb_refl in H. lia.
  - assert (sum n f <= sum n h + k) by (apply IHn; intros j Hj; apply H; lia).
    specialize (H n ltac:(lia)). destruct (Nat.eqb_spec n i); [lia|]. lia.
Qed.

(** ---- ancestors ----------------------------------------------------------------------------- *)

Lemma anc_trans g u v w : anc g u v -> anc g v w -> anc g u w.
Proof. intros Huv Hvw. induction Hvw.
  - eapply anc_step; eauto.
  - eapply anc_step; eauto. Qed.

Lemma anc_lt g v w : wf g -> w < size g -> anc g v w -> v < w.
Proof. intros Hg Hw H. induction H.
  - eapply wf_needs; eauto.
  - pose proof (wf_needs g Hg w p Hw H). specialize (IHanc ltac:(lia)). lia. Qed.

Lemma ancb_f_spec g : wf g -> forall f v w, w < size g -> w < f ->
  (ancb_f g f v w = true <-> anc g v w).
Proof.
  intros Hg f. induction f as [|f IH]; intros v w Hw Hf; [lia|]. simpl.
  rewrite existsb_exists. split.
  - intros (p & Hp & Hb). apply orb_true_iff in Hb. destruct Hb as [Hb|Hb].
    + apply Nat.eqb_eq in Hb; subst. now apply anc_edge.
    + pose proof (wf_needs g Hg w p Hw Hp).
      apply (anc_step g v p w Hp). apply (IH v p); [lia|lia|exact Hb].
  - intros H. inversion H; subst.
    + exists v. split; auto. now rewrite Nat.eqb_refl.
    + exists p. split; auto. pose proof (wf_needs g Hg w p Hw H0).
      apply orb_true_iff. right. apply (IH v p); [lia|lia|auto].
Qed.

Lemma ancb_spec g v w : wf g -> w < size g -> (ancb g v w = true <-> anc g v w).
Proof. intros. unfold ancb. apply ancb_f_spec; auto. Qed.

Lemma in_subtree_spec g u w : wf g -> w < size g ->
  (in_subtree g u w = true <-> w = u \/ anc g u w).
Proof. intros Hg Hw. unfold in_subtree. rewrite orb_true_iff, Nat.eqb_eq, ancb_spec; tauto. Qed.

Lemma in_pairs g d u : In (d, u) (pairs g) <-> d < size g /\ In u (repairs g d).
Proof.
  unfold pairs. rewrite in_flat_map. split.
  - intros (x & Hx & Hin). apply in_map_iff in Hin. destruct Hin as (y & Heq & Hy).
    inversion Heq; subst. apply in_seq in Hx. split; [lia|auto].
  - intros (Hd & Hu). exists d. split; [apply in_seq; lia|]. apply in_map_iff. eauto.
Qed.

Lemma weight_le_max g p : In p (pairs g) -> weight g p <= max_weight g.
Proof. unfold max_weight. induction (pairs g) as [|q l IH]; simpl; [tauto|].
  intros [->|H]; [lia|]. specialize (IH H). lia. Qed.

(** ---- guards -------------------------------------------------------------------------------- *)

Lemma running_some g s r : running g s = Some r -> r < size g /\ st s r = RUNNING.
Proof. unfold running. intros H. apply find_some in H. destruct H as [Hin Hr].
  apply in_seq in Hin. apply status_eqb_eq in Hr. split; [lia|auto]. Qed.

Lemma running_none g s : running g s = None -> forall i, i < size g -> st s i <> RUNNING.
Proof. unfold running. intros H i Hi Hr.
  assert (Hin : In i (seq 0 (size g))) by (apply in_seq; lia).
  pose proof (find_none _ _ H i Hin) as C. simpl in C. rewrite Hr in C. discriminate. Qed.

Lemma in_attempt_some g s r : in_attempt g s = Some r ->
  r < size g /\ st s r = RUNNING /\ live s = true.
Proof. unfold in_attempt. destruct (live s); [|discriminate]. intros H.
  apply running_some in H. tauto. Qed.

Lemma ready_spec g s v : ready g s v = true ->
  v < size g /\ live s = true /\ (forall i, i < size g -> st s i <> RUNNING)
  /\ (forall i, i < size g -> st s i <> EXHAUSTED) /\ st s v = PENDING
  /\ (forall p, In p (needs g v) -> st s p = DONE).
Proof.
  unfold ready. intros H. repeat rewrite andb_true_iff in H.
  destruct H as [[[[[H1 H2] H3] H4] H5] H6].
  apply Nat.ltb_lt in H1. apply status_eqb_eq in H5. rewrite forallb_forall in H6.
  destruct (running g s) eqn:Hr; [discriminate|].
  apply negb_true_iff in H4. unfold any_exhausted in H4.
  repeat split; auto.
  - apply running_none; auto.
  - intros i Hi He. assert (existsb (fun i => status_eqb (st s i) EXHAUSTED)
                              (seq 0 (size g)) = true) as C.
    { apply existsb_exists. exists i. split; [apply in_seq; lia|]. now rewrite He. }
    congruence.
  - intros p Hp. apply status_eqb_eq. auto.
Qed.

Ltac conj_tac := repeat match goal with |- _ /\ _ => split end; intros;
  try lia; try discriminate; try congruence.

(** ---- the invariants ------------------------------------------------------------------------ *)

Definition busy (x : status) : Prop := x = RUNNING \/ x = EXHAUSTED.
Definition started s w : Prop := st s w <> PENDING \/ 0 < atts s w.

(** remaining_v: the attempts node v may still begin in its activation *)
Definition rem g s v : nat :=
  match st s v with DONE | EXHAUSTED => 0 | _ => attempts_of g v - atts s v end.

(** G1's structural facts: counters in range, at most one node in flight or exhausted (so at
    most one attempt in flight), and J: a node that has started in its activation has every
    ancestor DONE. *)
Record structural g s : Prop := {
  i_range : forall i, i < size g -> atts s i <= attempts_of g i
            /\ (st s i = PENDING -> atts s i < attempts_of g i)
            /\ (st s i = RUNNING -> 1 <= atts s i);
  i_one : forall i j, i < size g -> j < size g -> busy (st s i) -> busy (st s j) -> i = j;
  i_total : forall i, i < size g -> st s i = RUNNING -> 1 <= total s;
  i_started : forall v w, w < size g -> started s w -> anc g v w -> st s v = DONE;
  i_repairs : repairs_used s <= repair_budget g
}.

Definition potential_ok g s : Prop :=
  total s + sum (size g) (rem g s) <= sum (size g) (attempts_of g) + repairs_used s * max_weight g.

Definition inv g s : Prop := structural g s /\ potential_ok g s.

(** G3: what is settled and reserved never passes B. *)
Definition g3 g s : Prop :=
  (0 <= settled s)%Z /\ (0 <= reserved s)%Z
  /\ forall b, spend_budget g = Some b -> (settled s + reserved s <= b)%Z.

Lemma inv_init g : wf g -> inv g (init g).
Proof.
  intros Hg. split; [split|]; simpl.
  - intros i Hi. pose proof (wf_attempts g Hg i Hi). conj_tac.
  - intros i j _ _ [H|H]; discriminate.
  - intros i _ H; discriminate.
  - intros v w _ [H|H]; simpl in H; [congruence|lia].
  - lia.
  - unfold potential_ok, rem; simpl. rewrite (sum_ext _ _ (attempts_of g)) by (intros; lia). lia.
Qed.

Lemma g3_init g : wf g -> g3 g (init g).
Proof. intros Hg. unfold g3; simpl. repeat split; try lia. intros b Hb.
  pose proof (wf_budget g Hg b Hb). lia. Qed.

(** A step that keeps statuses, counters, attempts_total and repairs_used keeps [inv]. *)
Lemma inv_frame g s s' : inv g s -> st s' = st s -> atts s' = atts s -> total s' = total s ->
  repairs_used s' = repairs_used s -> inv g s'.
Proof.
  intros [[R O T J U] P] Hst Hat Hto Hru. unfold started in J.
  split; [split|]; unfold started; try rewrite Hst; try rewrite Hat; try rewrite Hto;
    try rewrite Hru; auto.
  unfold potential_ok, rem in *. rewrite Hst, Hat, Hto, Hru. auto.
Qed.

Lemma ready_ancestors g s v : wf g -> inv g s -> ready g s v = true ->
  forall x, anc g x v -> st s x = DONE.
Proof.
  intros Hg [[R O T J U] P] Hr x Hx. apply ready_spec in Hr.
  destruct Hr as (Hv & _ & _ & _ & _ & Hn). inversion Hx; subst; auto.
  pose proof (wf_needs g Hg v p Hv H). apply (J x p); [lia| |auto].
  left. rewrite (Hn p H). discriminate.
Qed.

Ltac eqcase j i := let E := fresh "E" in
  destruct (Nat.eqb_spec j i) as [->|E];
  [rewrite ?Nat.eqb_refl in * | rewrite ?(proj2 (Nat.eqb_neq j i) E) in *].

Lemma inv_begin g s v s' : wf g -> inv g s -> step g s (Begin v) = Some s' -> inv g s'.
Proof.
  intros Hg I H. pose proof I as [[R O T J U] P]. simpl in H.
  destruct (ready g s v && fits g s v) eqn:G; [|discriminate]. injection H as <-.
  apply andb_true_iff in G as [Hrd _].
  pose proof (ready_ancestors g s v Hg I Hrd) as A.
  apply ready_spec in Hrd. destruct Hrd as (Hv & _ & NoR & NoX & Hp & _).
  destruct (R v Hv) as (Rv1 & Rv2 & Rv3). specialize (Rv2 Hp).
  split; [split|]; unfold upd, started; simpl.
  - intros i Hi. eqcase i v; [conj_tac|auto].
  - intros i j Hi Hj Bi Bj. unfold busy in *.
    eqcase i v; eqcase j v; auto; exfalso;
      first [destruct Bi as [Bi|Bi]; [exact (NoR i Hi Bi)|exact (NoX i Hi Bi)]
            |destruct Bj as [Bj|Bj]; [exact (NoR j Hj Bj)|exact (NoX j Hj Bj)]].
  - intros; lia.
  - intros x w Hw Hs Hx. pose proof (anc_lt g x w Hg Hw Hx). eqcase w v.
    + eqcase x v; [lia|]. apply A. auto.
    + assert (st s x = DONE) by (apply (J x w); auto). eqcase x v; [congruence|auto].
  - auto.
  - unfold potential_ok, rem in *; simpl.
    assert (sum (size g) (fun j => match upd (st s) v RUNNING j with
              | DONE | EXHAUSTED => 0
              | _ => attempts_of g j - upd (atts s) v (S (atts s v)) j end) + 1
            <= sum (size g) (fun j => match st s j with
              | DONE | EXHAUSTED => 0 | _ => attempts_of g j - atts s j end)).
    { apply (sum_point_down _ _ _ v); auto. intros j Hj. unfold upd.
      eqcase j v; [rewrite Hp; lia|lia]. }
    unfold upd in *. lia.
Qed.

Lemma inv_end g s r passed : wf g -> inv g s -> r < size g -> st s r = RUNNING ->
  inv g (end_attempt g s r passed).
Proof.
  intros Hg [[R O T J U] P] Hr Hrun. destruct (R r Hr) as (Rr1 & Rr2 & Rr3).
  assert (Hnew : forall x, x = DONE \/ x = PENDING \/ x = EXHAUSTED ->
    inv g (mkState (upd (st s) r x) (act s) (atts s) (passes s) (cancelled s) (repairs_used s)
                   (total s) (abandoned s) (settled s) (reserved s) 0%Z (outc s))
    -> True) by auto.
  clear Hnew.
  assert (Gen : forall x ps, (x = PENDING -> atts s r < attempts_of g r) -> x <> RUNNING ->
    inv g (mkState (upd (st s) r x) (act s) (atts s) ps (cancelled s) (repairs_used s)
                   (total s) (abandoned s) (settled s) (reserved s) 0%Z (outc s))).
  { intros x ps Hx Hxr. split; [split|]; unfold upd, started; simpl.
    - intros i Hi. eqcase i r; [|auto]. conj_tac; auto.
    - intros i j Hi Hj Bi Bj. apply (O i j Hi Hj).
      + eqcase i r; [rewrite Hrun; now left|auto].
      + eqcase j r; [rewrite Hrun; now left|auto].
    - intros i Hi Hri. eqcase i r; [congruence|]. eauto.
    - intros v w Hw Hs Hvw. assert (st s v = DONE).
      { apply (J v w Hw); auto. eqcase w r; [left; congruence|auto]. }
      eqcase v r; [congruence|auto].
    - auto.
    - unfold potential_ok, rem in *; simpl.
      enough (sum (size g) (fun j => match upd (st s) r x j with
                | DONE | EXHAUSTED => 0 | _ => attempts_of g j - atts s j end)
              <= sum (size g) (fun j => match st s j with
                | DONE | EXHAUSTED => 0 | _ => attempts_of g j - atts s j end))
        by (unfold upd in *; lia).
      apply sum_le. intros j Hj. unfold upd. eqcase j r; [|lia].
      rewrite Hrun. destruct x; lia. }
  unfold end_attempt. destruct passed.
  - apply Gen; discriminate.
  - apply Gen; [|destruct (atts s r <? attempts_of g r); discriminate].
    destruct (Nat.ltb_spec (atts s r) (attempts_of g r)); [auto|discriminate].
Qed.

Lemma inv_abandon g s v s' : wf g -> inv g s -> step g s (Abandon v) = Some s' -> inv g s'.
Proof.
  intros Hg [[R O T J U] P] H. simpl in H. destruct (in_attempt g s) as [r|] eqn:Ha;
    [|discriminate]. destruct (Nat.eqb_spec r v) as [<-|]; [|discriminate].
  injection H as <-. apply in_attempt_some in Ha. destruct Ha as (Hr & Hrun & _).
  destruct (R r Hr) as (Rr1 & Rr2 & Rr3). specialize (Rr3 Hrun). pose proof (T r Hr Hrun) as Tr.
  split; [split|]; unfold upd, started; simpl.
  - intros i Hi. eqcase i r; [conj_tac|auto].
  - intros i j Hi Hj Bi Bj. apply (O i j Hi Hj).
    + eqcase i r; [rewrite Hrun; now left|auto].
    + eqcase j r; [rewrite Hrun; now left|auto].
  - intros i Hi Hri. eqcase i r; [discriminate|].
    exfalso. apply E. apply (O i r Hi Hr); left; auto.
  - intros x w Hw Hs Hx. assert (st s x = DONE).
    { apply (J x w Hw); auto. eqcase w r; [left; congruence|auto]. }
    eqcase x r; [congruence|auto].
  - auto.
  - unfold potential_ok, rem in *; simpl.
    assert (sum (size g) (fun j => match upd (st s) r PENDING j with
              | DONE | EXHAUSTED => 0
              | _ => attempts_of g j - upd (atts s) r (pred (atts s r)) j end)
            <= sum (size g) (fun j => match st s j with
              | DONE | EXHAUSTED => 0 | _ => attempts_of g j - atts s j end) + 1).
    { apply (sum_point_up _ _ _ r). intros j Hj. unfold upd.
      eqcase j r; [rewrite Hrun; lia|lia]. }
    unfold upd in *. lia.
Qed.

Lemma inv_cancel g s v s' : wf g -> inv g s -> step g s (Cancel v) = Some s' -> inv g s'.
Proof.
  intros Hg I H. pose proof I as [[R O T J U] P]. simpl in H.
  destruct (ready g s v) eqn:Hrd; [|discriminate]. injection H as <-.
  pose proof (ready_ancestors g s v Hg I Hrd) as A.
  apply ready_spec in Hrd. destruct Hrd as (Hv & _ & NoR & NoX & Hp & _).
  destruct (R v Hv) as (Rv1 & Rv2 & Rv3). specialize (Rv2 Hp).
  split; [split|]; unfold upd, started; simpl.
  - intros i Hi. eqcase i v; [conj_tac|auto].
  - intros i j Hi Hj Bi Bj. unfold busy in *.
    eqcase i v; eqcase j v; auto; exfalso;
      first [destruct Bi as [Bi|Bi]; [exact (NoR i Hi Bi)|exact (NoX i Hi Bi)]
            |destruct Bj as [Bj|Bj]; [exact (NoR j Hj Bj)|exact (NoX j Hj Bj)]].
  - intros i Hi Hri. eqcase i v; [discriminate|]. exfalso. eapply NoR; eauto.
  - intros x w Hw Hs Hx. pose proof (anc_lt g x w Hg Hw Hx). eqcase w v.
    + eqcase x v; [lia|]. apply A. auto.
    + assert (st s x = DONE) by (apply (J x w); auto). eqcase x v; [congruence|auto].
  - auto.
  - unfold potential_ok, rem in *; simpl.
    enough (sum (size g) (fun j => match upd (st s) v EXHAUSTED j with
              | DONE | EXHAUSTED => 0 | _ => attempts_of g j - atts s j end)
            <= sum (size g) (fun j => match st s j with
              | DONE | EXHAUSTED => 0 | _ => attempts_of g j - atts s j end))
      by (unfold upd in *; lia).
    apply sum_le. intros j Hj. unfold upd. eqcase j v; [|lia]. lia.
Qed.

Lemma inv_repair g s d u s' : wf g -> inv g s -> step g s (Repair d u) = Some s' -> inv g s'.
Proof.
  intros Hg [[R O T J U] P] H. simpl in H.
  destruct (live s && (d <? size g) && existsb (Nat.eqb u) (repairs g d)
            && status_eqb (st s d) EXHAUSTED && (repairs_used s <? repair_budget g)) eqn:G;
    [|discriminate]. injection H as <-.
  repeat rewrite andb_true_iff in G. destruct G as [[[[_ Hd] Hu] Hx] Hk].
  apply Nat.ltb_lt in Hd, Hk. apply status_eqb_eq in Hx.
  apply existsb_exists in Hu. destruct Hu as (u' & Hu & Heq). apply Nat.eqb_eq in Heq. subst u'.
  (* a node of S_u outside the reset: its ancestors in S_u would put it in S_u *)
  assert (Sub : forall v w, w < size g -> anc g v w -> in_subtree g u v = true ->
                in_subtree g u w = true).
  { intros v w Hw Hvw Hv. pose proof (anc_lt g v w Hg Hw Hvw).
    apply (in_subtree_spec g u v Hg ltac:(lia)) in Hv. apply in_subtree_spec; auto. right.
    destruct Hv as [->|Hv]; auto. eapply anc_trans; eauto. }
  split; [split|]; unfold started; simpl.
  - intros i Hi. destruct (in_subtree g u i).
    + pose proof (wf_attempts g Hg i Hi). conj_tac.
    + auto.
  - intros i j Hi Hj Bi Bj. unfold busy in *. apply (O i j Hi Hj).
    + destruct (in_subtree g u i); auto. destruct Bi; discriminate.
    + destruct (in_subtree g u j); auto. destruct Bj; discriminate.
  - intros i Hi Hri. destruct (in_subtree g u i); [discriminate|eauto].
  - intros v w Hw Hs Hvw. destruct (in_subtree g u w) eqn:Hw'.
    + destruct Hs as [Hs|Hs]; [congruence|lia].
    + destruct (in_subtree g u v) eqn:Hv.
      * rewrite (Sub v w Hw Hvw Hv) in Hw'. discriminate.
      * apply (J v w); auto.
  - lia.
  - unfold potential_ok, rem in *; simpl.
    assert (sum (size g) (fun w => match (if in_subtree g u w then PENDING else st s w) with
              | DONE | EXHAUSTED => 0
              | _ => attempts_of g w - (if in_subtree g u w then 0 else atts s w) end)
            <= sum (size g) (fun j => match st s j with
              | DONE | EXHAUSTED => 0 | _ => attempts_of g j - atts s j end)
               + weight g (d, u)).
    { unfold weight. apply sum_le_add. intros w Hw.
      destruct (in_subtree g u w) eqn:Hin; simpl; [|lia].
      destruct (ancb g d w) eqn:Hdw; simpl; [|lia].
      apply ancb_spec in Hdw; auto.
      destruct (st s w) eqn:Hsw.
      - destruct (atts s w) eqn:Ha; [lia|].
        exfalso. assert (st s d = DONE) by (apply (J d w Hw); auto; right; lia). congruence.
      - exfalso. assert (st s d = DONE) by (apply (J d w Hw); auto; left; congruence).
        congruence.
      - exfalso. assert (st s d = DONE) by (apply (J d w Hw); auto; left; congruence).
        congruence.
      - exfalso. assert (st s d = DONE) by (apply (J d w Hw); auto; left; congruence).
        congruence. }
    assert (weight g (d, u) <= max_weight g) by (apply weight_le_max, in_pairs; auto).
    lia.
Qed.

Theorem inv_step g s e s' : wf g -> inv g s -> step g s e = Some s' -> inv g s'.
Proof.
  intros Hg I H. destruct e.
  - eapply inv_begin; eauto.
  - simpl in H. destruct (ready g s v && negb (fits g s v)); [|discriminate].
    injection H as <-. eapply inv_frame; eauto.
  - simpl in H. destruct (in_attempt g s); [|discriminate].
    destruct (_ && _); [|discriminate]. injection H as <-. eapply inv_frame; eauto.
  - simpl in H. destruct (in_attempt g s) eqn:Ha; [|discriminate].
    destruct (_ && _); [|discriminate]. injection H as <-.
    apply in_attempt_some in Ha. destruct Ha as (Hn & Hrun & _).
    exact (inv_end g s n false Hg I Hn Hrun).
  - simpl in H. destruct (in_attempt g s); [|discriminate].
    destruct (_ && _); [|discriminate]. injection H as <-. eapply inv_frame; eauto.
  - simpl in H. destruct (in_attempt g s) eqn:Ha; [|discriminate].
    destruct (Nat.eqb_spec n v) as [<-|]; [|discriminate]. simpl in H.
    destruct (reserved s <=? 0)%Z; [|discriminate]. injection H as <-.
    apply in_attempt_some in Ha. destruct Ha as (Hn & Hrun & _).
    exact (inv_end g s n passed Hg I Hn Hrun).
  - eapply inv_abandon; eauto.
  - simpl in H. destruct (in_attempt g s); [|discriminate].
    destruct (Nat.eqb _ _); [|discriminate]. injection H as <-. auto.
  - eapply inv_cancel; eauto.
  - eapply inv_repair; eauto.
  - simpl in H. destruct (_ && _); [|discriminate]. injection H as <-. eapply inv_frame; eauto.
  - simpl in H. destruct (_ && _); [|discriminate]. injection H as <-. eapply inv_frame; eauto.
Qed.

Theorem g3_step g s e s' : g3 g s -> step g s e = Some s' -> g3 g s'.
Proof.
  intros (Hs & Hr & Hb) H. unfold g3.
  destruct e; simpl in H.
  - destruct (_ && _); [|discriminate]. injection H as <-. simpl. auto.
  - destruct (_ && _); [|discriminate]. injection H as <-. simpl. auto.
  - destruct (in_attempt g s) as [r|]; [|discriminate].
    destruct ((0 <=? amount)%Z && reservation_fits g s r amount) eqn:G; [|discriminate].
    injection H as <-. simpl. apply andb_true_iff in G as [G1 G2]. apply Z.leb_le in G1.
    unfold reservation_fits in G2. apply andb_true_iff in G2 as [_ G2].
    repeat split; try lia. intros b Hbb. rewrite Hbb in G2. apply Z.leb_le in G2. lia.
  - destruct (in_attempt g s); [|discriminate]. destruct (_ && _); [|discriminate].
    injection H as <-. unfold end_attempt. destruct false; simpl; auto.
  - destruct (in_attempt g s); [|discriminate].
    destruct (match of with None => true | Some o => (0 <=? o)%Z && (o <=? reserved s)%Z end
              && (0 <=? amount)%Z && (amount <=? match of with None => reserved s
                                                      | Some o => o end)%Z) eqn:G;
      [|discriminate].
    injection H as <-. simpl. repeat rewrite andb_true_iff in G.
    destruct G as [[G1 G2] G3]. apply Z.leb_le in G2, G3.
    destruct of as [o|].
    + apply andb_true_iff in G1 as [G1 G1']. apply Z.leb_le in G1, G1'.
      repeat split; try lia. intros b Hbb. specialize (Hb b Hbb). lia.
    + repeat split; try lia. intros b Hbb. specialize (Hb b Hbb). lia.
  - destruct (in_attempt g s); [|discriminate]. destruct (_ && _); [|discriminate].
    injection H as <-. unfold end_attempt. destruct passed; simpl; auto.
  - destruct (in_attempt g s); [|discriminate]. destruct (Nat.eqb _ _); [|discriminate].
    injection H as <-. simpl. repeat split; try lia. intros b Hbb. specialize (Hb b Hbb). lia.
  - destruct (in_attempt g s); [|discriminate]. destruct (Nat.eqb _ _); [|discriminate].
    injection H as <-. auto.
  - destruct (ready g s v); [|discriminate]. injection H as <-. simpl. auto.
  - destruct (_ && _); [|discriminate]. injection H as <-. simpl. auto.
  - destruct (_ && _); [|discriminate]. injection H as <-. simpl. auto.
  - destruct (_ && _); [|discriminate]. injection H as <-. simpl. auto.
Qed.

Lemma reachable_inv g s : wf g -> reachable g s -> inv g s /\ g3 g s.
Proof.
  intros Hg H. induction H.
  - split; [apply inv_init|apply g3_init]; auto.
  - destruct IHreachable. split; [eapply inv_step|eapply g3_step]; eauto.
Qed.

(** ---- the theorems -------------------------------------------------------------------------- *)

(** G1: every reachable state of every well-formed graph has attempts_total <= W. *)
Theorem loopproof_W_bound : forall g s, wf g -> reachable g s -> total s <= W g.
Proof.
  intros g s Hg H. destruct (reachable_inv g s Hg H) as [[[_ _ _ _ U] P] _].
  unfold potential_ok, W in *.
  assert (repairs_used s * max_weight g <= repair_budget g * max_weight g)
    by (apply Nat.mul_le_mono_r; auto).
  lia.
Qed.

(** G1's structural facts on every reachable state. *)
Theorem loopproof_structural : forall g s, wf g -> reachable g s ->
  (forall i, i < size g -> atts s i <= attempts_of g i
             /\ (st s i = PENDING -> atts s i < attempts_of g i)
             /\ (st s i = RUNNING -> 1 <= atts s i))
  /\ (forall i j, i < size g -> j < size g -> st s i = RUNNING -> st s j = RUNNING -> i = j)
  /\ (forall v w, w < size g -> started s w -> anc g v w -> st s v = DONE)
  /\ repairs_used s <= repair_budget g.
Proof.
  intros g s Hg H. destruct (reachable_inv g s Hg H) as [[[R O _ J U] _] _].
  repeat split; try (apply R; auto); auto.
  intros i j Hi Hj Ri Rj. apply O; auto; left; auto.
Qed.

(** G3: on every reachable state 0 <= settled, 0 <= reserved and settled + reserved <= B. *)
Theorem loopproof_G3 : forall g s, wf g -> reachable g s ->
  (0 <= settled s)%Z /\ (0 <= reserved s)%Z
  /\ forall b, spend_budget g = Some b -> (settled s + reserved s <= b)%Z.
Proof. intros g s Hg H. apply (reachable_inv g s Hg H). Qed.
