(** The serial model is the concurrent one with max_parallel = 1: on every reachable state of
    every well-formed graph, the concurrent step restricted to one attempt in flight admits
    exactly the events the serial [step] admits and reaches the same state (spend events naming
    no attempt), and the two reach the same states.  And every serial run is a run with any
    max_parallel >= 1, so W is reached there too (docs/design.md: "every serial schedule is
    still a schedule"). *)

From Coq Require Import List Arith Lia ZArith Bool.
From Loopproof Require Import Loopproof Bound Tight Concurrent ConcurrentBound.
Import ListNotations.
Open Scope nat_scope.

Lemma erase_embed e : erase (embed e) = e.
Proof. destruct e; reflexivity. Qed.

Lemma zsum_single n f r : r < n -> (forall j, j < n -> j <> r -> f j = 0%Z) -> zsum n f = f r.
Proof.
  intros Hr H. rewrite (zsum_point n (fun _ => 0%Z) f r Hr).
  - rewrite zsum_zero by auto. lia.
  - intros j Hj Hjr. apply H; auto.
Qed.

Lemma sum_single_one n r : r < n -> sum n (fun i => if Nat.eqb i r then 1 else 0) = 1.
Proof.
  intros Hr. pose proof (sum_upd n (fun _ => 0) r 1 Hr) as E.
  rewrite (sum_ext n (fun _ => 0) (fun _ => 0)) in E by auto.
  assert (Z0 : sum n (fun _ => 0) = 0) by (clear; induction n; simpl; lia).
  unfold upd in E. rewrite Z0 in E. simpl in E. lia.
Qed.

Section Instance.
Variable g : graph.
Hypothesis Hg : wf g.
Variable m : nat.
Hypothesis Hm : 1 <= m.
Notation n := (size g).
Notation cg := (par g m).

(** What the serial invariant says of a concurrent state whose control part is reachable in
    the serial model. *)
Section Facts.
Variable cs : cstate.
Hypothesis I : cinv cg cs.
Hypothesis Hr : reachable g (ctl cs).

Notation x := (ctl cs).

Lemma one_busy : forall i j, i < n -> j < n -> busy (st x i) -> busy (st x j) -> i = j.
Proof. destruct (reachable_inv g x Hg Hr) as [[[_ O _ _ _] _] _]. exact O. Qed.

Lemma running_nrun r : running g x = Some r -> nrun cg cs = 1 /\ r < n /\ st x r = RUNNING.
Proof.
  intros H. apply running_some in H. destruct H as [Hr' Hrun]. split; [|auto].
  unfold nrun. simpl. transitivity (sum n (fun i => if Nat.eqb i r then 1 else 0));
    [|apply sum_single_one; auto].
  apply sum_ext. intros i Hi.
  destruct (Nat.eqb_spec i r) as [->|Hne].
  - replace (is_running (ctl cs) r) with true by (symmetry; apply is_running_spec; auto). auto.
  - destruct (is_running (ctl cs) i) eqn:E; auto. apply is_running_spec in E.
    exfalso. apply Hne. apply one_busy; auto; left; auto.
Qed.

Lemma running_none_nrun : running g x = None -> nrun cg cs = 0.
Proof. intros H. apply nrun_none. apply running_none; auto. Qed.

Lemma cin_attempt_none : cin_attempt cg cs None = in_attempt g x.
Proof.
  unfold cin_attempt, in_attempt. destruct (live x); auto.
  destruct (running g x) as [r|] eqn:E.
  - rewrite (proj1 (running_nrun r E)). auto.
  - rewrite (running_none_nrun E). auto.
Qed.

Lemma cin_attempt_serial node i : cin_attempt cg cs node = Some i -> in_attempt g x = Some i.
Proof.
  destruct node as [v|]; [|rewrite cin_attempt_none; auto].
  intros H. pose proof (cin_attempt_some cg cs _ _ H) as (Hi & Hrun & Hl & Hv).
  specialize (Hv v eq_refl). subst v. unfold in_attempt. rewrite Hl.
  destruct (running g x) as [r|] eqn:E.
  - apply running_some in E. destruct E as [Hr' Hrr]. f_equal.
    apply one_busy; auto; left; auto.
  - exfalso. exact (running_none g x E i Hi Hrun).
Qed.

Lemma in_attempt_cin r : in_attempt g x = Some r -> cin_attempt cg cs (Some r) = Some r.
Proof.
  intros H. pose proof (in_attempt_some g x r H) as (Hr' & Hrun & Hl).
  unfold cin_attempt. rewrite Hl. simpl.
  replace (r <? n) with true by (symmetry; apply Nat.ltb_lt; auto).
  replace (is_running x r) with true by (symmetry; apply is_running_spec; auto). auto.
Qed.

(** The attempt in flight holds every open reservation and all of attempt_spend. *)
Lemma accounts_of r : r < n -> st x r = RUNNING ->
  reserved x = res cs r /\ attempt_spend x = spt cs r /\ (0 <= res cs r)%Z.
Proof.
  intros Hr' Hrun. destruct (c_totals cg cs I) as [T1 T2].
  assert (Oth : forall j, j < n -> j <> r -> res cs j = 0%Z /\ spt cs j = 0%Z).
  { intros j Hj Hjr. apply (c_accounts cg cs I j Hj). intros E. apply Hjr.
    apply one_busy; auto; left; auto. }
  destruct (c_accounts cg cs I r Hr') as [A _]. specialize (A Hrun).
  split; [|split; [|lia]].
  - rewrite T1. apply zsum_single; auto. intros j Hj Hjr. apply Oth; auto.
  - rewrite T2. apply zsum_single; auto. intros j Hj Hjr. apply Oth; auto.
Qed.

Lemma idle_accounts : (forall i, i < n -> st x i <> RUNNING) ->
  reserved x = 0%Z /\ attempt_spend x = 0%Z /\ held cg cs = settled x.
Proof.
  intros H. destruct (c_totals cg cs I) as [T1 T2].
  assert (Z : forall j, j < n -> res cs j = 0%Z /\ spt cs j = 0%Z)
    by (intros j Hj; apply (c_accounts cg cs I j Hj); auto).
  split; [|split].
  - rewrite T1. apply zsum_zero. intros j Hj. apply Z; auto.
  - rewrite T2. apply zsum_zero. intros j Hj. apply Z; auto.
  - unfold held. rewrite zsum_zero; [simpl; lia|]. intros j Hj. simpl.
    destruct (is_running (ctl cs) j) eqn:E; auto. apply is_running_spec in E.
    exfalso. exact (H j Hj E).
Qed.

(** With nothing in flight, Begin's, Refuse's and Cancel's guards are the serial ones. *)
Lemma guards_idle v : (forall i, i < n -> st x i <> RUNNING) ->
  cready cg cs v = ready g x v /\ cfits cg cs v = fits g x v /\ nrun cg cs = 0.
Proof.
  intros H. assert (N0 : nrun cg cs = 0) by (apply nrun_none; auto).
  assert (R0 : running g x = None).
  { destruct (running g x) as [r|] eqn:E; auto. apply running_some in E.
    destruct E. exfalso. eapply H; eauto. }
  destruct (idle_accounts H) as (_ & _ & Hh).
  split; [|split; auto].
  - unfold cready, ready. rewrite N0, R0. simpl.
    replace (0 <? m) with true by (symmetry; apply Nat.ltb_lt; lia). auto.
  - unfold cfits, fits. simpl. rewrite Hh. auto.
Qed.

Lemma exhausted_idle d : d < n -> st x d = EXHAUSTED -> forall i, i < n -> st x i <> RUNNING.
Proof.
  intros Hd Hx i Hi Hrun. assert (i = d) by (apply one_busy; auto; [left|right]; auto).
  subst. congruence.
Qed.

Ltac mkstate_eq := unfold upd; try match goal with |- Some _ = Some _ => apply f_equal end;
  f_equal; try lia.

(** Every event the serial model admits, the concurrent one admits, to the same state. *)
Lemma serial_step_concurrent e x' : step g x e = Some x' ->
  exists cs', cstep cg cs (embed e) = Some cs' /\ ctl cs' = x'.
Proof.
  intros H. destruct e; simpl embed; unfold step in H.
  - (* Begin *)
    destruct (ready g x v && fits g x v) eqn:G; [|discriminate]. injection H as <-.
    pose proof G as G'. apply andb_true_iff in G' as [Hrd _].
    apply ready_spec in Hrd. destruct Hrd as (_ & _ & NoR & _).
    destruct (guards_idle v NoR) as (E1 & E2 & N0).
    eexists. split; [unfold cstep; cbv zeta; rewrite E1, E2, G; reflexivity|].
    simpl. rewrite N0. reflexivity.
  - (* Refuse *)
    destruct (ready g x v && negb (fits g x v)) eqn:G; [|discriminate]. injection H as <-.
    pose proof G as G'. apply andb_true_iff in G' as [Hrd _].
    apply ready_spec in Hrd. destruct Hrd as (_ & _ & NoR & _).
    destruct (guards_idle v NoR) as (E1 & E2 & N0).
    eexists. split; [unfold cstep; cbv zeta; rewrite E1, E2, N0; simpl;
                     rewrite andb_true_r, G; reflexivity|reflexivity].
  - (* Reserve *)
    destruct (in_attempt g x) as [r|] eqn:Ha; [|discriminate].
    destruct ((0 <=? amount)%Z && reservation_fits g x r amount) eqn:G; [|discriminate].
    injection H as <-. pose proof (in_attempt_some g x r Ha) as (Hr' & Hrun & _).
    destruct (accounts_of r Hr' Hrun) as (A1 & A2 & _).
    eexists. split.
    + unfold cstep; cbv zeta. rewrite cin_attempt_none. rewrite Ha.
      unfold creservation_fits. simpl. rewrite <- A2. unfold reservation_fits in G.
      rewrite G. reflexivity.
    + reflexivity.
  - (* Overrun *)
    destruct (in_attempt g x) as [r|] eqn:Ha; [|discriminate].
    destruct ((0 <=? amount)%Z && (reserved x <=? 0)%Z
              && negb (reservation_fits g x r amount)) eqn:G; [|discriminate].
    injection H as <-. pose proof (in_attempt_some g x r Ha) as (Hr' & Hrun & _).
    destruct (accounts_of r Hr' Hrun) as (A1 & A2 & A3).
    eexists. split.
    + unfold cstep; cbv zeta. rewrite cin_attempt_none. rewrite Ha.
      unfold creservation_fits. simpl. rewrite <- A1, <- A2. unfold reservation_fits in G.
      rewrite G. reflexivity.
    + repeat rewrite andb_true_iff in G. destruct G as [[_ G] _]. apply Z.leb_le in G.
      unfold cend_attempt, end_attempt. simpl. mkstate_eq.
  - (* Settle *)
    destruct (in_attempt g x) as [r|] eqn:Ha; [|discriminate].
    destruct (match of with None => true | Some o => (0 <=? o)%Z && (o <=? reserved x)%Z end
              && (0 <=? amount)%Z && (amount <=? match of with None => reserved x
                                                      | Some o => o end)%Z) eqn:G;
      [|discriminate].
    injection H as <-. pose proof (in_attempt_some g x r Ha) as (Hr' & Hrun & _).
    destruct (accounts_of r Hr' Hrun) as (A1 & A2 & A3).
    eexists. split.
    + unfold cstep; cbv zeta. rewrite cin_attempt_none. rewrite Ha.
      rewrite <- A1. rewrite G. reflexivity.
    + simpl. destruct of; mkstate_eq.
  - (* Verdict *)
    destruct (in_attempt g x) as [r|] eqn:Ha; [|discriminate].
    destruct (Nat.eqb_spec r v) as [<-|]; [|discriminate]. simpl in H.
    destruct (reserved x <=? 0)%Z eqn:G; [|discriminate]. injection H as <-.
    pose proof (in_attempt_some g x r Ha) as (Hr' & Hrun & _).
    destruct (accounts_of r Hr' Hrun) as (A1 & A2 & A3).
    eexists. split.
    + unfold cstep; cbv zeta. rewrite (in_attempt_cin r Ha). rewrite <- A1.
      rewrite G. reflexivity.
    + apply Z.leb_le in G. unfold cend_attempt, end_attempt.
      destruct passed; simpl; mkstate_eq.
  - (* Abandon *)
    destruct (in_attempt g x) as [r|] eqn:Ha; [|discriminate].
    destruct (Nat.eqb_spec r v) as [<-|]; [|discriminate]. injection H as <-.
    pose proof (in_attempt_some g x r Ha) as (Hr' & Hrun & _).
    destruct (accounts_of r Hr' Hrun) as (A1 & A2 & A3).
    eexists. split.
    + unfold cstep; cbv zeta. rewrite (in_attempt_cin r Ha). reflexivity.
    + simpl. mkstate_eq.
  - (* Claim *)
    destruct (in_attempt g x) as [r|] eqn:Ha; [|discriminate].
    destruct (Nat.eqb_spec r v) as [<-|]; [|discriminate]. injection H as <-.
    exists cs. split; auto. unfold cstep; cbv zeta. rewrite (in_attempt_cin r Ha). auto.
  - (* Cancel *)
    destruct (ready g x v) eqn:G; [|discriminate]. injection H as <-.
    pose proof G as Hrd. apply ready_spec in Hrd. destruct Hrd as (_ & _ & NoR & _).
    destruct (guards_idle v NoR) as (E1 & _ & _).
    eexists. split; [unfold cstep; cbv zeta; rewrite E1, G; reflexivity|reflexivity].
  - (* Repair *)
    destruct (live x && (d <? n) && existsb (Nat.eqb u) (repairs g d)
              && status_eqb (st x d) EXHAUSTED && (repairs_used x <? repair_budget g)) eqn:G;
      [|discriminate]. injection H as <-.
    assert (Idle : subtree_idle cg cs u = true).
    { repeat rewrite andb_true_iff in G. destruct G as [[[[_ Hd] _] Hx] _].
      apply Nat.ltb_lt in Hd. apply status_eqb_eq in Hx.
      unfold subtree_idle. apply forallb_forall. intros w Hw. apply in_seq in Hw.
      destruct (is_running (ctl cs) w) eqn:E; [|rewrite andb_false_r; auto].
      apply is_running_spec in E. exfalso. exact (exhausted_idle d Hd Hx w ltac:(simpl in *; lia) E). }
    eexists. split; [unfold cstep; cbv zeta; simpl; rewrite G, Idle; reflexivity|].
    reflexivity.
  - (* Fail *)
    destruct (live x && (v <? n) && status_eqb (st x v) EXHAUSTED
              && negb (has_pair g v && (repairs_used x <? repair_budget g))) eqn:G;
      [|discriminate]. injection H as <-.
    assert (N0 : nrun cg cs = 0).
    { repeat rewrite andb_true_iff in G. destruct G as [[[_ Hv] Hx] _].
      apply Nat.ltb_lt in Hv. apply status_eqb_eq in Hx. apply nrun_none.
      exact (exhausted_idle v Hv Hx). }
    eexists. split; [unfold cstep; cbv zeta; simpl; rewrite G, N0; reflexivity|].
    reflexivity.
  - (* Finish *)
    destruct (live x && all_done g x) eqn:G; [|discriminate]. injection H as <-.
    eexists. split; [unfold cstep; cbv zeta; simpl; rewrite G; reflexivity|].
    reflexivity.
Qed.

(** With max_parallel = 1, every event the concurrent model admits, the serial one admits (a
    spend event naming the attempt in flight is the one naming none), to the same state. *)
Lemma concurrent_step_serial ce cs' : m = 1 -> cstep cg cs ce = Some cs' ->
  step g x (erase ce) = Some (ctl cs').
Proof.
  intros M1 H. destruct ce; simpl erase; unfold cstep in H; cbv zeta in H.
  - (* Begin *)
    destruct (cready cg cs v && cfits cg cs v) eqn:G; [|discriminate]. injection H as <-.
    pose proof G as G'. apply andb_true_iff in G' as [Hrd _].
    apply cready_spec in Hrd. destruct Hrd as (_ & _ & Hn & _). simpl in Hn.
    assert (NoR : forall i, i < n -> st x i <> RUNNING) by (intros i Hi; apply (nrun_zero cg cs ltac:(lia) i Hi)).
    destruct (guards_idle v NoR) as (E1 & E2 & N0).
    unfold step. rewrite <- E1, <- E2, G. simpl. rewrite N0. reflexivity.
  - (* Refuse *)
    destruct (cready cg cs v && (nrun cg cs =? 0) && negb (cfits cg cs v)) eqn:G;
      [|discriminate]. injection H as <-.
    pose proof G as G'. repeat rewrite andb_true_iff in G'. destruct G' as [[Hrd _] _].
    apply cready_spec in Hrd. destruct Hrd as (_ & _ & Hn & _). simpl in Hn.
    assert (NoR : forall i, i < n -> st x i <> RUNNING) by (intros i Hi; apply (nrun_zero cg cs ltac:(lia) i Hi)).
    destruct (guards_idle v NoR) as (E1 & E2 & N0).
    rewrite N0 in G. simpl in G. rewrite andb_true_r in G.
    unfold step. rewrite <- E1, <- E2, G. reflexivity.
  - (* Reserve *)
    destruct (cin_attempt cg cs node) as [i|] eqn:Ha; [|discriminate].
    destruct ((0 <=? amount)%Z && creservation_fits cg cs i amount) eqn:G; [|discriminate].
    injection H as <-. unfold reserve_effect; cbv zeta.
    pose proof (cin_attempt_some cg cs _ _ Ha) as (Hi & Hrun & _).
    destruct (accounts_of i Hi Hrun) as (A1 & A2 & _).
    unfold step. rewrite (cin_attempt_serial node i Ha). unfold reservation_fits.
    rewrite A2. unfold creservation_fits in G. simpl in G. rewrite G. reflexivity.
  - (* Overrun *)
    destruct (cin_attempt cg cs node) as [i|] eqn:Ha; [|discriminate].
    destruct ((0 <=? amount)%Z && (res cs i <=? 0)%Z
              && negb (creservation_fits cg cs i amount)) eqn:G; [|discriminate].
    injection H as <-. pose proof (cin_attempt_some cg cs _ _ Ha) as (Hi & Hrun & _).
    destruct (accounts_of i Hi Hrun) as (A1 & A2 & A3).
    unfold step. rewrite (cin_attempt_serial node i Ha). unfold reservation_fits.
    unfold creservation_fits in G. simpl in G. rewrite <- A1, <- A2 in G. rewrite G.
    repeat rewrite andb_true_iff in G. destruct G as [[_ G] _]. apply Z.leb_le in G.
    unfold cend_attempt, end_attempt. simpl. mkstate_eq.
  - (* Settle *)
    destruct (cin_attempt cg cs node) as [i|] eqn:Ha; [|discriminate].
    destruct (match of with None => true | Some o => (0 <=? o)%Z && (o <=? res cs i)%Z end
              && (0 <=? amount)%Z && (amount <=? match of with None => res cs i
                                                      | Some o => o end)%Z) eqn:G;
      [|discriminate].
    injection H as <-. pose proof (cin_attempt_some cg cs _ _ Ha) as (Hi & Hrun & _).
    destruct (accounts_of i Hi Hrun) as (A1 & A2 & A3).
    unfold step. rewrite (cin_attempt_serial node i Ha). rewrite A1, G. simpl.
    destruct of; mkstate_eq.
  - (* Verdict *)
    destruct (cin_attempt cg cs (Some v)) as [i|] eqn:Ha; [|discriminate].
    destruct (res cs i <=? 0)%Z eqn:G; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some cg cs _ _ Ha) as (Hi & Hrun & _ & Hv).
    specialize (Hv v eq_refl). subst v.
    destruct (accounts_of i Hi Hrun) as (A1 & A2 & A3).
    unfold step. rewrite (cin_attempt_serial (Some i) i Ha). rewrite Nat.eqb_refl, A1, G.
    apply Z.leb_le in G. unfold cend_attempt, end_attempt.
    destruct passed; simpl; mkstate_eq.
  - (* Abandon *)
    destruct (cin_attempt cg cs (Some v)) as [i|] eqn:Ha; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some cg cs _ _ Ha) as (Hi & Hrun & _ & Hv).
    specialize (Hv v eq_refl). subst v.
    destruct (accounts_of i Hi Hrun) as (A1 & A2 & A3).
    unfold step. rewrite (cin_attempt_serial (Some i) i Ha). rewrite Nat.eqb_refl. simpl.
    mkstate_eq.
  - (* Claim *)
    destruct (cin_attempt cg cs (Some v)) as [i|] eqn:Ha; [|discriminate]. injection H as <-.
    pose proof (cin_attempt_some cg cs _ _ Ha) as (_ & _ & _ & Hv).
    specialize (Hv v eq_refl). subst v.
    unfold step. rewrite (cin_attempt_serial (Some i) i Ha). rewrite Nat.eqb_refl. auto.
  - (* Cancel *)
    destruct (cready cg cs v) eqn:G; [|discriminate]. injection H as <-.
    pose proof G as Hrd. apply cready_spec in Hrd. destruct Hrd as (_ & _ & Hn & _).
    simpl in Hn.
    assert (NoR : forall i, i < n -> st x i <> RUNNING) by (intros i Hi; apply (nrun_zero cg cs ltac:(lia) i Hi)).
    destruct (guards_idle v NoR) as (E1 & _ & _).
    unfold step. rewrite <- E1, G. reflexivity.
  - (* Repair *)
    destruct (live x && (d <? size (base cg)) && existsb (Nat.eqb u) (repairs (base cg) d)
              && status_eqb (st x d) EXHAUSTED
              && (repairs_used x <? repair_budget (base cg)) && subtree_idle cg cs u) eqn:G;
      [|discriminate]. injection H as <-.
    apply andb_true_iff in G as [G _]. simpl in G.
    unfold step. rewrite G. reflexivity.
  - (* Fail *)
    destruct (live x && (v <? size (base cg)) && status_eqb (st x v) EXHAUSTED
              && negb (has_pair (base cg) v && (repairs_used x <? repair_budget (base cg)))
              && (nrun cg cs =? 0)) eqn:G; [|discriminate]. injection H as <-.
    apply andb_true_iff in G as [G _]. simpl in G.
    unfold step. rewrite G. reflexivity.
  - (* Finish *)
    destruct (live x && all_done (base cg) x) eqn:G; [|discriminate]. injection H as <-.
    simpl in G. unfold step. rewrite G. reflexivity.
Qed.

End Facts.

(** Every serial run is a run with max_parallel = m. *)
Lemma serial_runs s : reachable g s -> exists cs, creachable cg cs /\ ctl cs = s.
Proof.
  intros H. induction H as [|s e s' Hs IH Hst].
  - exists (cinit cg). split; [constructor|reflexivity].
  - destruct IH as (cs & Hc & <-).
    pose proof (creachable_inv cg Hg cs Hc) as I.
    assert (Hr : reachable g (ctl cs)) by exact Hs.
    destruct (serial_step_concurrent cs I Hs e s' Hst) as (cs' & H1 & H2).
    exists cs'. split; auto. econstructor; eauto.
Qed.

End Instance.

Lemma concurrent_runs_serial g cs : wf g -> creachable (par g 1) cs -> reachable g (ctl cs).
Proof.
  intros Hg H. induction H as [|cs ce cs' Hc IH Hst].
  - constructor.
  - pose proof (creachable_inv (par g 1) Hg cs Hc) as I.
    econstructor; [exact IH|].
    exact (concurrent_step_serial g Hg 1 (le_n 1) cs I IH ce cs' eq_refl Hst).
Qed.

(** ---- the theorems -------------------------------------------------------------------------- *)

(** The serial model is the instance max_parallel = 1 of the concurrent one: the same states are
    reachable, and on each of them the concurrent step of an event (its spend events naming no
    attempt) is the serial step. *)
Theorem loopproof_serial_instance : forall g, wf g ->
  (forall s, reachable g s <-> exists cs, creachable (par g 1) cs /\ ctl cs = s)
  /\ (forall cs e, creachable (par g 1) cs ->
        option_map ctl (cstep (par g 1) cs (embed e)) = step g (ctl cs) e).
Proof.
  intros g Hg. split.
  - intros s. split.
    + apply (serial_runs g Hg 1 (le_n 1)).
    + intros (cs & Hc & <-). apply concurrent_runs_serial; auto.
  - intros cs e Hc. pose proof (creachable_inv (par g 1) Hg cs Hc) as I.
    pose proof (concurrent_runs_serial g cs Hg Hc) as Hr.
    destruct (step g (ctl cs) e) as [x'|] eqn:E.
    + destruct (serial_step_concurrent g Hg 1 (le_n 1) cs I Hr e x' E) as (cs' & H1 & H2).
      rewrite H1. simpl. congruence.
    + destruct (cstep (par g 1) cs (embed e)) as [cs'|] eqn:C; auto.
      pose proof (concurrent_step_serial g Hg 1 (le_n 1) cs I Hr (embed e) cs' eq_refl C)
        as S. rewrite erase_embed in S. congruence.
Qed.

(** Every serial run is a run with any max_parallel >= 1. *)
Theorem loopproof_serial_runs_concurrent : forall g m, wf g -> 1 <= m ->
  forall s, reachable g s -> exists cs, creachable (par g m) cs /\ ctl cs = s.
Proof. intros g m Hg Hm. apply serial_runs; auto. Qed.

(** W is reached with any max_parallel >= 1 (B unbounded): W is exactly the worst case of the
    concurrent model too. *)
Theorem loopproof_W_tight_concurrent : forall g m, wf g -> 1 <= m -> spend_budget g = None ->
  exists cs, creachable (par g m) cs /\ total (ctl cs) = W g.
Proof.
  intros g m Hg Hm Hinf. destruct (loopproof_W_tight g Hg Hinf) as (s & Hs & Ht).
  destruct (serial_runs g Hg m Hm s Hs) as (cs & Hc & <-). eauto.
Qed.
