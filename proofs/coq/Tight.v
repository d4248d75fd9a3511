(** G1's bound W is reached: for every well-formed graph with an unbounded B, some run from Init
    makes exactly W attempts -- the schedule of docs/bounds.md ("Why W is reached"): take the
    maximising pair (d, u); run every node outside {d} u desc(d), then d, which fails every
    attempt and is repaired by (d, u) while repairs are left, each round re-running
    S_u \ ({d} u desc(d)) before d; then d passes and desc(d) runs.  Every node fails until its
    last attempt and passes on it. *)

From Coq Require Import List Arith Lia ZArith Bool.
From Loopproof Require Import Loopproof Bound.
Import ListNotations.
Open Scope nat_scope.

Section Tight.
Variable g : graph.
Hypothesis Hg : wf g.
Hypothesis Hinf : spend_budget g = None.

Notation n := (size g).
Notation a := (attempts_of g).

Fixpoint tries (v m : nat) (last : bool) : list event :=
  match m with
  | O => [Begin v; Verdict v last]
  | S m' => Begin v :: Verdict v false :: tries v m' last
  end.

(** Every node w <> v of D is DONE, every other one PENDING with no attempt. *)
Definition frame (s : state) (D : nat -> bool) (v : nat) : Prop :=
  forall w, w < n -> w <> v ->
    (D w = true -> st s w = DONE) /\ (D w = false -> st s w = PENDING /\ atts s w = 0).

Definition clean (s : state) (D : nat -> bool) : Prop :=
  (forall w, w < n ->
    (D w = true -> st s w = DONE) /\ (D w = false -> st s w = PENDING /\ atts s w = 0))
  /\ live s = true /\ reserved s = 0%Z.

Lemma run_app s es1 es2 :
  run g s (es1 ++ es2) = match run g s es1 with Some s1 => run g s1 es2 | None => None end.
Proof. revert s. induction es1 as [|e es IH]; intros s; simpl; auto.
  destruct (step g s e); auto. Qed.

Lemma run_cons s e es :
  run g s (e :: es) = match step g s e with Some s1 => run g s1 es | None => None end.
Proof. reflexivity. Qed.

Lemma run_reachable s es s' : reachable g s -> run g s es = Some s' -> reachable g s'.
Proof. revert s. induction es as [|e es IH]; intros s Hs H; simpl in H.
  - congruence.
  - destruct (step g s e) eqn:E; [|discriminate]. eapply IH; [|eauto]. econstructor; eauto.
Qed.

Lemma find_unique (f : nat -> bool) l v :
  (forall i, In i l -> (f i = true <-> i = v)) -> In v l -> find f l = Some v.
Proof. induction l as [|x l IH]; simpl; [tauto|]. intros H Hv.
  destruct (f x) eqn:E.
  - apply (H x (or_introl eq_refl)) in E. congruence.
  - destruct Hv as [->|Hv].
    + assert (f v = true) by (apply (H v); auto). congruence.
    + apply IH; auto. Qed.

(** One attempt of v: Begin, then the verdict b. *)
Lemma attempt s D v j b :
  v < n -> frame s D v -> (forall p, In p (needs g v) -> D p = true) ->
  st s v = PENDING -> atts s v = j -> j < a v -> live s = true -> reserved s = 0%Z ->
  exists s2, run g s [Begin v; Verdict v b] = Some s2
    /\ frame s2 D v /\ atts s2 v = S j
    /\ st s2 v = (if b then DONE else if S j <? a v then PENDING else EXHAUSTED)
    /\ total s2 = S (total s) /\ repairs_used s2 = repairs_used s
    /\ live s2 = true /\ reserved s2 = 0%Z.
Proof.
  intros Hv F N Hp Hj Hja Hl Hr.
  assert (NR : forall i, i < n -> st s i <> RUNNING).
  { intros i Hi. destruct (Nat.eq_dec i v) as [->|Hne]; [congruence|].
    destruct (D i) eqn:Di; [rewrite (proj1 (F i Hi Hne) Di)|rewrite (proj1 (proj2 (F i Hi Hne) Di))];
      discriminate. }
  assert (NX : forall i, i < n -> st s i <> EXHAUSTED).
  { intros i Hi. destruct (Nat.eq_dec i v) as [->|Hne]; [congruence|].
    destruct (D i) eqn:Di; [rewrite (proj1 (F i Hi Hne) Di)|rewrite (proj1 (proj2 (F i Hi Hne) Di))];
      discriminate. }
  assert (Rd : ready g s v = true).
  { unfold ready. repeat rewrite andb_true_iff. repeat split.
    - apply Nat.ltb_lt; auto.
    - auto.
    - destruct (running g s) as [i|] eqn:E; auto. apply running_some in E.
      destruct E as [Hi Hs]. exfalso. exact (NR i Hi Hs).
    - destruct (any_exhausted g s) eqn:E; auto. unfold any_exhausted in E.
      apply existsb_exists in E. destruct E as (i & Hi & Hs). apply in_seq in Hi.
      apply status_eqb_eq in Hs. exfalso. exact (NX i ltac:(lia) Hs).
    - rewrite Hp. reflexivity.
    - apply forallb_forall. intros p Hin. pose proof (wf_needs g Hg v p Hv Hin).
      rewrite (proj1 (F p ltac:(lia) ltac:(lia)) (N p Hin)). reflexivity. }
  assert (Fi : fits g s v = true) by (unfold fits; rewrite Hinf; reflexivity).
  set (s1 := mkState (upd (st s) v RUNNING) (act s) (upd (atts s) v (S (atts s v)))
                     (passes s) (cancelled s) (repairs_used s) (S (total s)) (abandoned s)
                     (settled s) (reserved s) 0%Z (outc s)).
  assert (S1 : step g s (Begin v) = Some s1) by (simpl; rewrite Rd, Fi; reflexivity).
  assert (IA : in_attempt g s1 = Some v).
  { unfold in_attempt. replace (live s1) with (live s) by reflexivity. rewrite Hl.
    unfold running. apply find_unique; [|apply in_seq; lia].
    intros i Hi. apply in_seq in Hi. simpl. unfold upd. rewrite status_eqb_eq.
    destruct (Nat.eqb_spec i v); [tauto|]. split; [intros E; exfalso; exact (NR i ltac:(lia) E)|lia]. }
  assert (S2 : step g s1 (Verdict v b) = Some (end_attempt g s1 v b)).
  { simpl step. rewrite IA. rewrite Nat.eqb_refl. simpl. rewrite Hr. reflexivity. }
  exists (end_attempt g s1 v b). split; [rewrite run_cons, S1, run_cons, S2; reflexivity|].
  split.
  { intros w Hw Hne. unfold end_attempt. destruct b; simpl; unfold upd;
      destruct (Nat.eqb_spec w v); try lia; apply F; auto. }
  unfold end_attempt; destruct b; simpl; unfold upd; rewrite ?Nat.eqb_refl; rewrite Hj;
    repeat split; auto.
Qed.

(** All attempts of v's activation: m failures, then the verdict b, from attempt j with
    j + m + 1 = a_v. *)
Lemma activation : forall m s D v j b,
  v < n -> frame s D v -> (forall p, In p (needs g v) -> D p = true) ->
  st s v = PENDING -> atts s v = j -> j + S m = a v -> live s = true -> reserved s = 0%Z ->
  exists s2, run g s (tries v m b) = Some s2
    /\ frame s2 D v /\ st s2 v = (if b then DONE else EXHAUSTED)
    /\ total s2 = total s + S m /\ repairs_used s2 = repairs_used s
    /\ live s2 = true /\ reserved s2 = 0%Z.
Proof.
  induction m as [|m IH]; intros s D v j b Hv F N Hp Hj Hm Hl Hr.
  - destruct (attempt s D v j b Hv F N Hp Hj ltac:(lia) Hl Hr)
      as (s2 & R & F2 & A2 & S2 & T2 & U2 & L2 & R2).
    exists s2. simpl tries. split; [exact R|]. split; [exact F2|]. split.
    + rewrite S2. destruct b; auto. destruct (Nat.ltb_spec (S j) (a v)); [lia|auto].
    + split; [lia|]. auto.
  - destruct (attempt s D v j false Hv F N Hp Hj ltac:(lia) Hl Hr)
      as (s2 & R & F2 & A2 & S2 & T2 & U2 & L2 & R2).
    destruct (Nat.ltb_spec (S j) (a v)); [|lia].
    destruct (IH s2 D v (S j) b Hv F2 N S2 A2 ltac:(lia) L2 R2)
      as (s3 & R3 & F3 & S3 & T3 & U3 & L3 & RR3).
    exists s3. split.
    + change (tries v (S m) b) with ([Begin v; Verdict v false] ++ tries v m b).
      rewrite run_app, R. exact R3.
    + split; [exact F3|]. split; [exact S3|]. split; [lia|]. split; [lia|]. auto.
Qed.

Definition add_node (D : nat -> bool) v : nat -> bool := fun w => D w || Nat.eqb w v.

Lemma clean_frame s D v : clean s D -> D v = false -> frame s D v.
Proof. intros (C & _ & _) Dv w Hw _. apply C; auto. Qed.

(** A whole node in a phase: it runs from PENDING to DONE, and is added to D. *)
Lemma node_done s D v : v < n -> clean s D -> D v = false ->
  (forall p, In p (needs g v) -> D p = true) ->
  exists s2, run g s (tries v (pred (a v)) true) = Some s2 /\ clean s2 (add_node D v)
    /\ total s2 = total s + a v /\ repairs_used s2 = repairs_used s.
Proof.
  intros Hv C Dv N. destruct C as (C & Hl & Hr).
  destruct (C v Hv) as [_ P]. destruct (P Dv) as [Hp Hj].
  pose proof (wf_attempts g Hg v Hv).
  assert (Fr : frame s D v) by (intros w Hw _; apply C; auto).
  destruct (activation (pred (a v)) s D v 0 true Hv Fr N Hp Hj ltac:(lia) Hl Hr)
    as (s2 & R & F2 & S2 & T2 & U2 & L2 & R2).
  exists s2. split; [exact R|]. split; [|split; lia]. split; [|split; auto].
  intros w Hw. split.
  - intros Dw. unfold add_node in Dw. destruct (Nat.eqb_spec w v) as [->|Hne]; auto.
    rewrite orb_false_r in Dw. apply F2; auto.
  - intros Dw. unfold add_node in Dw. apply orb_false_iff in Dw. destruct Dw as [Dw E].
    apply Nat.eqb_neq in E. apply F2; auto.
Qed.

Lemma clean_ext s D D' : clean s D -> (forall w, w < n -> D w = D' w) -> clean s D'.
Proof. intros (C & L & R) E. split; auto. intros w Hw. rewrite <- (E w Hw). auto. Qed.

Fixpoint phase (l : list nat) : list event :=
  match l with [] => [] | v :: rest => tries v (pred (a v)) true ++ phase rest end.

Fixpoint lsum (l : list nat) : nat := match l with [] => 0 | v :: r => a v + lsum r end.

Definition add_list (D : nat -> bool) (l : list nat) : nat -> bool :=
  fun w => D w || existsb (Nat.eqb w) l.

(** A phase over filter P (seq start len): each node's needs are in D or earlier in it. *)
Lemma phase_run : forall len start (P : nat -> bool) s D,
  clean s D ->
  (forall v, start <= v < start + len -> P v = true -> v < n /\ D v = false
     /\ forall p, In p (needs g v) -> D p = true \/ (start <= p < v /\ P p = true)) ->
  exists s2, run g s (phase (filter P (seq start len))) = Some s2
    /\ clean s2 (add_list D (filter P (seq start len)))
    /\ total s2 = total s + lsum (filter P (seq start len))
    /\ repairs_used s2 = repairs_used s.
Proof.
  induction len as [|len IH]; intros start P s D C H.
  - exists s. simpl. split; [reflexivity|]. split; [|split; lia].
    apply (clean_ext s D); auto. intros w _. unfold add_list. simpl. rewrite orb_false_r. auto.
  - simpl seq. simpl filter. destruct (P start) eqn:Ps.
    + destruct (H start ltac:(lia) Ps) as (Hv & Dv & N).
      assert (N' : forall p, In p (needs g start) -> D p = true).
      { intros p Hp. destruct (N p Hp) as [?|[? _]]; auto; lia. }
      destruct (node_done s D start Hv C Dv N') as (s2 & R2 & C2 & T2 & U2).
      destruct (IH (S start) P s2 (add_node D start) C2) as (s3 & R3 & C3 & T3 & U3).
      { intros v Hr Pv. destruct (H v ltac:(lia) Pv) as (Hv' & Dv' & Nv).
        split; [auto|]. split.
        - unfold add_node. rewrite Dv'. simpl. apply Nat.eqb_neq. lia.
        - intros p Hp. unfold add_node. destruct (Nv p Hp) as [Dp|[Hpr Pp]].
          + left. rewrite Dp. auto.
          + destruct (Nat.eqb_spec p start); [left; apply orb_true_r|right; split; [lia|auto]]. }
      exists s3. simpl phase. rewrite run_app, R2. split; [exact R3|]. split; [|split].
      * apply (clean_ext s3 _ _ C3). intros w _. unfold add_list, add_node. simpl.
        rewrite Nat.eqb_sym. destruct (D w), (Nat.eqb start w); reflexivity.
      * simpl lsum. lia.
      * lia.
    + destruct (IH (S start) P s D C) as (s3 & R3 & C3 & T3 & U3).
      { intros v Hr Pv. destruct (H v ltac:(lia) Pv) as (Hv' & Dv' & Nv).
        split; [auto|]. split; [auto|]. intros p Hp. destruct (Nv p Hp) as [Dp|[Hpr Pp]]; auto.
        right. split; auto. destruct (Nat.eq_dec p start); [congruence|lia]. }
      exists s3. auto.
Qed.

Lemma lsum_filter : forall len start (P : nat -> bool),
  lsum (filter P (seq start len)) + sum start (fun w => if P w then a w else 0)
  = sum (start + len) (fun w => if P w then a w else 0).
Proof.
  induction len as [|len IH]; intros start P; simpl.
  - rewrite Nat.add_0_r. auto.
  - specialize (IH (S start) P). replace (start + S len) with (S start + len) by lia.
    rewrite <- IH. simpl. destruct (P start); simpl; lia.
Qed.

Lemma lsum_all (P : nat -> bool) :
  lsum (filter P (seq 0 n)) = sum n (fun w => if P w then a w else 0).
Proof. pose proof (lsum_filter n 0 P). simpl in H. lia. Qed.

Lemma in_add_list (D : nat -> bool) (P : nat -> bool) w : w < n ->
  add_list D (filter P (seq 0 n)) w = D w || P w.
Proof.
  intros Hw. unfold add_list. f_equal. destruct (P w) eqn:Pw.
  - apply existsb_exists. exists w. rewrite filter_In, in_seq, Nat.eqb_refl. repeat split; auto; lia.
  - destruct (existsb (Nat.eqb w) (filter P (seq 0 n))) eqn:E; auto.
    apply existsb_exists in E. destruct E as (x & Hx & Ex). apply Nat.eqb_eq in Ex. subst.
    apply filter_In in Hx. destruct Hx; congruence.
Qed.

Lemma sum_plus m f h : sum m (fun i => f i + h i) = sum m f + sum m h.
Proof. induction m; simpl; lia. Qed.

Lemma sum_zero m f : (forall i, i < m -> f i = 0) -> sum m f = 0.
Proof. induction m; simpl; intros H; auto. rewrite IHm by (intros; apply H; lia).
  rewrite (H m) by lia. auto. Qed.

Lemma sum_single m v : v < m -> sum m (fun i => if Nat.eqb i v then a i else 0) = a v.
Proof.
  induction m; intros Hv; [lia|]. simpl. destruct (Nat.eqb_spec m v) as [->|Hne].
  - rewrite sum_zero; [lia|]. intros i Hi. destruct (Nat.eqb_spec i v); [lia|auto].
  - rewrite IHm by lia. lia.
Qed.


Lemma anc_self_false v : v < n -> ~ anc g v v.
Proof. intros Hv H. pose proof (anc_lt g v v Hg Hv H). lia. Qed.

Section Pair.
Variables d u : nat.
Hypothesis Hd : d < n.
Hypothesis Hu : In u (repairs g d).

Definition outside w := negb (Nat.eqb w d || ancb g d w).
Definition L1 := filter outside (seq 0 n).
Definition L2 := filter (fun w => in_subtree g u w && outside w) (seq 0 n).
Definition L3 := filter (ancb g d) (seq 0 n).

Lemma d_in_subtree : in_subtree g u d = true.
Proof. apply in_subtree_spec; auto. destruct (wf_repairs g Hg d u Hd Hu); auto. Qed.

Lemma outside_d : outside d = false.
Proof. unfold outside. rewrite Nat.eqb_refl. reflexivity. Qed.

(** A need of a node outside {d} u desc(d) is outside too. *)
Lemma outside_needs v p : v < n -> In p (needs g v) -> outside v = true -> outside p = true.
Proof.
  intros Hv Hp Ov. pose proof (wf_needs g Hg v p Hv Hp).
  unfold outside in *. destruct (Nat.eqb_spec p d) as [->|Hne].
  - exfalso. apply negb_true_iff, orb_false_iff in Ov. destruct Ov as [_ A].
    assert (anc g d v) by (apply anc_edge; auto). apply (ancb_spec g d v Hg Hv) in H0. congruence.
  - simpl. destruct (ancb g d p) eqn:A; auto. exfalso.
    apply (ancb_spec g d p Hg ltac:(lia)) in A. apply negb_true_iff, orb_false_iff in Ov. destruct Ov as [_ B].
    assert (anc g d v) by (eapply anc_step; eauto). apply (ancb_spec g d v Hg Hv) in H0. congruence.
Qed.

Lemma needs_d_outside p : In p (needs g d) -> outside p = true.
Proof.
  intros Hp. pose proof (wf_needs g Hg d p Hd Hp). unfold outside.
  destruct (Nat.eqb_spec p d); [lia|]. destruct (ancb g d p) eqn:A; auto.
  apply (ancb_spec g d p Hg ltac:(lia)) in A. pose proof (anc_lt g d p Hg ltac:(lia) A). lia.
Qed.

Lemma round s : clean s outside -> repairs_used s < repair_budget g ->
  exists s2, run g s (tries d (pred (a d)) false ++ [Repair d u]) = Some s2
    /\ clean s2 (fun w => outside w && negb (in_subtree g u w))
    /\ total s2 = total s + a d /\ repairs_used s2 = S (repairs_used s).
Proof.
  intros C Hk. destruct C as (C & Hl & Hr).
  destruct (C d Hd) as [_ P]. destruct (P outside_d) as [Hp Hj].
  pose proof (wf_attempts g Hg d Hd).
  assert (Fr : frame s outside d) by (intros w Hw _; apply C; auto).
  destruct (activation (pred (a d)) s outside d 0 false Hd Fr needs_d_outside Hp Hj
              ltac:(lia) Hl Hr) as (s1 & R1 & F1 & S1 & T1 & U1 & L1' & R1').
  assert (G : live s1 && Nat.ltb d n && existsb (Nat.eqb u) (repairs g d)
              && status_eqb (st s1 d) EXHAUSTED && Nat.ltb (repairs_used s1) (repair_budget g)
              = true).
  { rewrite L1', S1, U1. simpl. rewrite (proj2 (Nat.ltb_lt _ _) Hd).
    rewrite (proj2 (Nat.ltb_lt _ _) Hk). simpl.
    replace (existsb (Nat.eqb u) (repairs g d)) with true; auto.
    symmetry. apply existsb_exists. exists u. rewrite Nat.eqb_refl. auto. }
  eexists. rewrite run_app, R1, run_cons. simpl step. rewrite G. simpl.
  split; [reflexivity|]. split; [|split; simpl; lia].
  split; [|split; auto]. intros w Hw. simpl. destruct (in_subtree g u w) eqn:Sw.
  - rewrite andb_false_r. split; [discriminate|auto].
  - rewrite andb_true_r. assert (w <> d) by (intro; subst; rewrite d_in_subtree in Sw; discriminate).
    apply F1; auto.
Qed.

Fixpoint rounds (k : nat) : list event :=
  match k with
  | O => []
  | S k' => tries d (pred (a d)) false ++ [Repair d u] ++ phase L2 ++ rounds k'
  end.

Lemma rounds_run : forall k s, clean s outside -> repairs_used s + k <= repair_budget g ->
  exists s2, run g s (rounds k) = Some s2 /\ clean s2 outside
    /\ total s2 = total s + k * (a d + lsum L2) /\ repairs_used s2 = repairs_used s + k.
Proof.
  induction k as [|k IH]; intros s C Hk.
  - exists s. simpl. split; [auto|]. split; [auto|]. split; lia.
  - destruct (round s C ltac:(lia)) as (s1 & R1 & C1 & T1 & U1).
    destruct (phase_run n 0 (fun w => in_subtree g u w && outside w) s1 _ C1)
      as (s2 & R2 & C2 & T2 & U2).
    { intros v Hv Pv. apply andb_true_iff in Pv. destruct Pv as [Sv Ov].
      split; [lia|]. split; [rewrite Sv, andb_false_r; auto|].
      intros p Hp. pose proof (wf_needs g Hg v p ltac:(lia) Hp).
      pose proof (outside_needs v p ltac:(lia) Hp Ov) as Op. rewrite Op.
      destruct (in_subtree g u p); [right; split; [lia|auto]|left; auto]. }
    assert (C2' : clean s2 outside).
    { apply (clean_ext s2 _ _ C2). intros w Hw. rewrite in_add_list by auto.
      destruct (outside w), (in_subtree g u w); reflexivity. }
    destruct (IH s2 C2' ltac:(lia)) as (s3 & R3 & C3 & T3 & U3).
    exists s3.
    replace (rounds (S k)) with ((tries d (pred (a d)) false ++ [Repair d u])
                                   ++ phase L2 ++ rounds k)
      by (cbn [rounds]; rewrite <- app_assoc; reflexivity).
    rewrite run_app, R1, run_app.
    fold L2 in R2. rewrite R2. split; [exact R3|]. split; [auto|].
    fold L2 in T2. split; lia.
Qed.

Definition schedule : list event :=
  phase L1 ++ rounds (repair_budget g) ++ tries d (pred (a d)) true ++ phase L3.

Lemma schedule_run : exists s, run g (init g) schedule = Some s
  /\ total s = lsum L1 + repair_budget g * (a d + lsum L2) + a d + lsum L3.
Proof.
  assert (C0 : clean (init g) (fun _ => false)).
  { split; [|split; reflexivity]. intros w _. split; [discriminate|auto]. }
  destruct (phase_run n 0 outside (init g) _ C0) as (s1 & R1 & C1 & T1 & U1).
  { intros v Hv Ov. split; [lia|]. split; [auto|]. intros p Hp.
    pose proof (wf_needs g Hg v p ltac:(lia) Hp). right. split; [lia|].
    apply (outside_needs v p); auto; lia. }
  fold L1 in R1, C1, T1.
  assert (C1' : clean s1 outside).
  { apply (clean_ext s1 _ _ C1). intros w Hw. unfold L1. rewrite in_add_list; auto. }
  destruct (rounds_run (repair_budget g) s1 C1' ltac:(simpl in U1; lia)) as (s2 & R2 & C2 & T2 & U2).
  destruct (node_done s2 outside d Hd C2 outside_d needs_d_outside) as (s3 & R3 & C3 & T3 & U3).
  destruct (phase_run n 0 (ancb g d) s3 _ C3) as (s4 & R4 & C4 & T4 & U4).
  { intros v Hv Av. split; [lia|]. split.
    - unfold add_node, outside. rewrite Av, orb_true_r. simpl. apply Nat.eqb_neq. intros ->.
      apply (ancb_spec g d d Hg Hd) in Av. exact (anc_self_false d Hd Av).
    - intros p Hp. pose proof (wf_needs g Hg v p ltac:(lia) Hp).
      unfold add_node, outside. destruct (Nat.eqb_spec p d) as [->|Hne].
      + left. apply orb_true_r.
      + destruct (ancb g d p) eqn:A; [right; split; [lia|auto]|left; reflexivity]. }
  fold L3 in R4, T4.
  exists s4. unfold schedule. rewrite run_app, R1, run_app, R2, run_app, R3, R4.
  split; [reflexivity|]. simpl in T1. lia.
Qed.

Lemma weight_split : weight g (d, u) = a d + lsum L2.
Proof.
  unfold weight, L2. rewrite lsum_all. rewrite <- (sum_single n d Hd). rewrite <- sum_plus.
  apply sum_ext. intros w Hw. unfold outside. destruct (Nat.eqb_spec w d) as [->|Hne].
  - rewrite d_in_subtree. replace (ancb g d d) with false; [simpl; lia|].
    symmetry. destruct (ancb g d d) eqn:A; auto. apply (ancb_spec g d d Hg Hd) in A.
    exfalso. exact (anc_self_false d Hd A).
  - simpl. destruct (in_subtree g u w), (ancb g d w); simpl; lia.
Qed.

Lemma total_split : sum n a = lsum L1 + a d + lsum L3.
Proof.
  unfold L1, L3. rewrite !lsum_all. rewrite <- (sum_single n d Hd).
  rewrite <- !sum_plus. apply sum_ext. intros w Hw. unfold outside.
  destruct (Nat.eqb_spec w d) as [->|Hne].
  - replace (ancb g d d) with false; [simpl; lia|].
    symmetry. destruct (ancb g d d) eqn:A; auto. apply (ancb_spec g d d Hg Hd) in A.
    exfalso. exact (anc_self_false d Hd A).
  - simpl. destruct (ancb g d w); simpl; lia.
Qed.

End Pair.

Lemma max_attained : pairs g <> [] -> exists p, In p (pairs g) /\ weight g p = max_weight g.
Proof.
  unfold max_weight. induction (pairs g) as [|p l IH]; [congruence|]. intros _. simpl.
  destruct l as [|q l].
  - exists p. simpl. split; [auto|lia].
  - destruct IH as (x & Hx & Ex); [discriminate|].
    destruct (Nat.le_ge_cases (weight g p) (fold_right (fun p m => Nat.max (weight g p) m) 0 (q :: l))).
    + exists x. split; [right; auto|]. rewrite Ex. lia.
    + exists p. split; [left; auto|]. lia.
Qed.

Theorem W_tight : exists s, reachable g s /\ total s = W g.
Proof.
  destruct (pairs g) as [|p0 l] eqn:Hp.
  - assert (C0 : clean (init g) (fun _ => false)).
    { split; [|split; reflexivity]. intros w _. split; [discriminate|auto]. }
    destruct (phase_run n 0 (fun _ => true) (init g) _ C0) as (s1 & R1 & _ & T1 & _).
    { intros v Hv _. split; [lia|]. split; [auto|]. intros p Hpn.
      pose proof (wf_needs g Hg v p ltac:(lia) Hpn). right. split; [lia|auto]. }
    exists s1. split; [eapply run_reachable; [constructor|eauto]|].
    rewrite T1, lsum_all. unfold W, max_weight. rewrite Hp. simpl.
    rewrite Nat.mul_0_r, Nat.add_0_r. apply sum_ext. auto.
  - destruct (max_attained ltac:(rewrite Hp; discriminate)) as ((d, u) & Hin & Hw).
    apply in_pairs in Hin. destruct Hin as [Hd Hu].
    destruct (schedule_run d u Hd Hu) as (s & R & T).
    exists s. split; [eapply run_reachable; [constructor|eauto]|].
    rewrite T. unfold W. rewrite (total_split d Hd), <- Hw, (weight_split d u Hd Hu). lia.
Qed.

End Tight.

(** G1's bound is reached: for every well-formed graph with an unbounded B, some run from Init
    makes exactly W attempts. *)
Theorem loopproof_W_tight : forall g, wf g -> spend_budget g = None ->
  exists s, reachable g s /\ total s = W g.
Proof. intros g Hg Hinf. exact (W_tight g Hg Hinf). Qed.
