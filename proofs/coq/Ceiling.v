(** G3's attempt ceiling for every finite DAG: the attempt in flight has settled and reserved at
    most its node's c_v (reserved <= attempt_spend <= c_v, attempt_spend being what the attempt
    has settled plus what it holds), and with no attempt in flight nothing is reserved or charged
    to one.  Conjoined with G1's structural facts and G3's invariant (alone it is not
    inductive), as G3-attempt-ceiling is in Z3. *)

From Coq Require Import List Arith Lia ZArith Bool.
From Loopproof Require Import Loopproof Bound.
Import ListNotations.
Open Scope Z_scope.

Definition ceiling_ok g s : Prop :=
  (forall r, (r < size g)%nat -> st s r = RUNNING ->
     0 <= reserved s <= attempt_spend s /\ attempt_spend s <= ceiling g r)
  /\ ((forall i, (i < size g)%nat -> st s i <> RUNNING) -> reserved s = 0 /\ attempt_spend s = 0).

Lemma ceiling_init g : ceiling_ok g (init g).
Proof. split; simpl; [discriminate|]. intros _. lia. Qed.

Lemma ceiling_frame g s s' : ceiling_ok g s -> st s' = st s -> reserved s' = reserved s ->
  attempt_spend s' = attempt_spend s -> ceiling_ok g s'.
Proof. intros [A B] H1 H2 H3. split; rewrite H1, H2, H3; auto. Qed.

(** An attempt ends (or is given back) with nothing reserved: nothing is in flight after. *)
Lemma ceiling_end g s r x (ps : list (nat * nat)) rs st0 :
  inv g s -> (r < size g)%nat -> st s r = RUNNING -> x <> RUNNING -> rs = 0 ->
  ceiling_ok g {| st := upd (st s) r x; act := act s; atts := st0; passes := ps;
                  cancelled := cancelled s; repairs_used := repairs_used s; total := total s;
                  abandoned := abandoned s; settled := settled s; reserved := rs;
                  attempt_spend := 0; outc := outc s |}.
Proof.
  intros [[R O T J U] P] Hr Hrun Hx Hrs. split; simpl; unfold upd.
  - intros i Hi. destruct (Nat.eqb_spec i r); [congruence|].
    intros Hi'. exfalso. apply n. apply (O i r Hi Hr); left; auto.
  - intros _. lia.
Qed.

Theorem ceiling_step g s e s' : wf g -> inv g s -> g3 g s -> ceiling_ok g s ->
  step g s e = Some s' -> ceiling_ok g s'.
Proof.
  intros Hg I G3 C H. pose proof I as [[R O T J U] P]. destruct G3 as (Gs & Gr & _).
  destruct C as [CR CN]. destruct e; simpl in H.
  - (* Begin *)
    destruct (ready g s v && fits g s v) eqn:Gd; [|discriminate]. injection H as <-.
    apply andb_true_iff in Gd as [Rd _]. apply ready_spec in Rd.
    destruct Rd as (Hv & _ & NoR & _ & Hp & _). destruct (CN NoR) as [Hr0 _].
    pose proof (wf_ceilings g Hg v Hv).
    split; simpl; unfold upd.
    + intros r Hr. destruct (Nat.eqb_spec r v) as [->|Hne]; [intros _; lia|].
      intros E. exfalso. exact (NoR r Hr E).
    + intros Hno. exfalso. apply (Hno v Hv). rewrite Nat.eqb_refl. reflexivity.
  - (* Refuse *)
    destruct (_ && _); [|discriminate]. injection H as <-.
    apply (ceiling_frame g s); auto. split; auto.
  - (* Reserve *)
    destruct (in_attempt g s) as [r|] eqn:Ha; [|discriminate].
    destruct ((0 <=? amount)%Z && reservation_fits g s r amount) eqn:Gd; [|discriminate].
    injection H as <-. apply in_attempt_some in Ha. destruct Ha as (Hr & Hrun & _).
    apply andb_true_iff in Gd as [G1 G2]. apply Z.leb_le in G1.
    unfold reservation_fits in G2. apply andb_true_iff in G2 as [G2 _]. apply Z.leb_le in G2.
    destruct (CR r Hr Hrun) as [[A1 A2] A3].
    split; simpl.
    + intros r' Hr' Hrun'. rewrite (O r' r Hr' Hr (or_introl Hrun') (or_introl Hrun)). lia.
    + intros Hno. exfalso. exact (Hno r Hr Hrun).
  - (* Overrun *)
    destruct (in_attempt g s) as [r|] eqn:Ha; [|discriminate].
    destruct (_ && _ && _) eqn:Gd; [|discriminate]. injection H as <-.
    apply in_attempt_some in Ha. destruct Ha as (Hr & Hrun & _).
    repeat rewrite andb_true_iff in Gd. destruct Gd as [[_ G2] _]. apply Z.leb_le in G2.
    refine (ceiling_end g s r _ _ (reserved s) (atts s) I Hr Hrun _ _);
      [destruct (Nat.ltb (atts s r) (attempts_of g r)); discriminate|lia].
  - (* Settle *)
    destruct (in_attempt g s) as [r|] eqn:Ha; [|discriminate].
    destruct (match of with None => true | Some o => (0 <=? o)%Z && (o <=? reserved s)%Z end
              && (0 <=? amount)%Z && (amount <=? match of with None => reserved s
                                                      | Some o => o end)%Z) eqn:Gd;
      [|discriminate].
    injection H as <-. apply in_attempt_some in Ha. destruct Ha as (Hr & Hrun & _).
    destruct (CR r Hr Hrun) as [[A1 A2] A3].
    repeat rewrite andb_true_iff in Gd. destruct Gd as [[G1 G2] G3]. apply Z.leb_le in G2, G3.
    assert (Rel : 0 <= match of with None => reserved s | Some o => o end <= reserved s).
    { destruct of as [o|]; [|lia]. apply andb_true_iff in G1 as [G1 G1'].
      apply Z.leb_le in G1, G1'. lia. }
    split; simpl.
    + intros r' Hr' Hrun'. rewrite (O r' r Hr' Hr (or_introl Hrun') (or_introl Hrun)). lia.
    + intros Hno. exfalso. exact (Hno r Hr Hrun).
  - (* Verdict *)
    destruct (in_attempt g s) as [r|] eqn:Ha; [|discriminate].
    destruct (Nat.eqb_spec r v) as [<-|]; [|discriminate]. simpl in H.
    destruct (reserved s <=? 0)%Z eqn:Gd; [|discriminate]. injection H as <-.
    apply Z.leb_le in Gd. apply in_attempt_some in Ha. destruct Ha as (Hr & Hrun & _).
    unfold end_attempt. destruct passed.
    + refine (ceiling_end g s r _ _ (reserved s) (atts s) I Hr Hrun _ _); [discriminate|lia].
    + refine (ceiling_end g s r _ _ (reserved s) (atts s) I Hr Hrun _ _);
        [destruct (Nat.ltb (atts s r) (attempts_of g r)); discriminate|lia].
  - (* Abandon *)
    destruct (in_attempt g s) as [r|] eqn:Ha; [|discriminate].
    destruct (Nat.eqb_spec r v) as [<-|]; [|discriminate]. injection H as <-.
    apply in_attempt_some in Ha. destruct Ha as (Hr & Hrun & _).
    split; simpl; unfold upd.
    + intros i Hi. destruct (Nat.eqb_spec i r); [discriminate|].
      intros Hi'. exfalso. apply n. apply (O i r Hi Hr); left; auto.
    + intros _. lia.
  - (* Claim *)
    destruct (in_attempt g s); [|discriminate]. destruct (Nat.eqb _ _); [|discriminate].
    injection H as <-. split; auto.
  - (* Cancel *)
    destruct (ready g s v) eqn:Rd; [|discriminate]. injection H as <-.
    apply ready_spec in Rd. destruct Rd as (Hv & _ & NoR & _ & Hp & _).
    destruct (CN NoR) as [Hr0 Ha0].
    split; simpl; unfold upd.
    + intros r Hr. destruct (Nat.eqb_spec r v); [discriminate|]. intros E.
      exfalso. exact (NoR r Hr E).
    + intros _. auto.
  - (* Repair *)
    destruct (live s && Nat.ltb d (size g) && existsb (Nat.eqb u) (repairs g d)
              && status_eqb (st s d) EXHAUSTED && Nat.ltb (repairs_used s) (repair_budget g))
      eqn:Gd;
      [|discriminate]. injection H as <-.
    repeat rewrite andb_true_iff in Gd. destruct Gd as [[[[_ Hd] _] Hx] _].
    apply Nat.ltb_lt in Hd. apply status_eqb_eq in Hx.
    assert (NoR : forall i, (i < size g)%nat -> st s i <> RUNNING).
    { intros i Hi E. assert (i = d) by (apply (O i d Hi Hd); [left|right]; auto).
      subst. congruence. }
    destruct (CN NoR) as [Hr0 Ha0].
    split; simpl.
    + intros r Hr. destruct (in_subtree g u r); [discriminate|]. intros E.
      exfalso. exact (NoR r Hr E).
    + intros _. auto.
  - (* Fail *)
    destruct (_ && _); [|discriminate]. injection H as <-. split; auto.
  - (* Finish *)
    destruct (_ && _); [|discriminate]. injection H as <-. split; auto.
Qed.

(** G3's attempt ceiling on every reachable state of every well-formed graph. *)
Theorem loopproof_G3_ceiling : forall g s, wf g -> reachable g s ->
  (forall r, (r < size g)%nat -> st s r = RUNNING ->
     0 <= reserved s <= attempt_spend s /\ attempt_spend s <= ceiling g r)
  /\ ((forall i, (i < size g)%nat -> st s i <> RUNNING) -> reserved s = 0 /\ attempt_spend s = 0).
Proof.
  intros g s Hg H.
  assert (inv g s /\ g3 g s /\ ceiling_ok g s) as (_ & _ & C); [|exact C].
  induction H.
  - split; [apply inv_init; auto|]. split; [apply g3_init; auto|apply ceiling_init].
  - destruct IHreachable as (I & G & C). split; [eapply inv_step; eauto|].
    split; [eapply g3_step; eauto|]. eapply ceiling_step; eauto.
Qed.
