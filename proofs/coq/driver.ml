(* Drives the step functions and W extracted from the Coq development (extracted.ml) for the
   differential test (tests/proofs/test_coq_model.py).  Reads cases from stdin, whitespace-separated
   tokens:
     case VARIANT N K B          the serial step; B an integer number of quanta, or - for unbounded
     pcase VARIANT MP N K B      the concurrent step with at most MP attempts in flight
       N times: A C NNEEDS needs... NREPAIRS repairs...     (node indices, topological order)
       M, then M events: begin V | refuse V | reserve X | overrun X | settle X (O|-)
         | verdict V (0|1) | abandon V | claim V | cancel V | repair D U | fail V | finish
       (in a pcase, reserve, overrun and settle end with the attempt's node: V, or - for none)
   and prints one JSON line per case: {"W": W, "states": [init, ...], "admitted": [...]}: after
   a disabled event the state stays (as the Python model's Disabled leaves it).  A pcase's
   states add each node's account, "res" and "spt" (and "rep", the per-node repair counters of
   the per_node_repairs variant).  The glue only parses, tabulates a state's functions on
   0..N-1 (so a long run does not build long closure chains) and prints. *)
open Extracted

let tokens =
  let buf = Buffer.create 65536 in
  (try while true do Buffer.add_channel buf stdin 1 done with End_of_file -> ());
  ref (List.filter (fun s -> s <> "") (String.split_on_char ' '
    (String.map (fun c -> if c = '\n' || c = '\t' || c = '\r' then ' ' else c)
       (Buffer.contents buf))))

let next () = match !tokens with t :: rest -> tokens := rest; t | [] -> failwith "eof"
let int () = int_of_string (next ())
let list () = let k = int () in List.init k (fun _ -> int ())

let tab n f = let a = Array.init n f in fun i -> if i >= 0 && i < n then a.(i) else f i

let normal n s = { s with st = tab n s.st; act = tab n s.act; atts = tab n s.atts }

let status_name = function
  | PENDING -> "PENDING" | RUNNING -> "RUNNING" | DONE -> "DONE" | EXHAUSTED -> "EXHAUSTED"
let outcome_name = function
  | ORUNNING -> "RUNNING" | ODONE -> "DONE" | OFAILED -> "FAILED" | OBUDGET -> "BUDGET_EXHAUSTED"

let ints n f = String.concat "," (List.init n (fun i -> string_of_int (f i)))

let json_state n s =
  let ints = ints n in
  let pairs l = String.concat "," (List.map (fun (a, b) -> Printf.sprintf "[%d,%d]" a b) l) in
  Printf.sprintf
    "{\"status\":[%s],\"activation\":[%s],\"attempts\":[%s],\"passes\":[%s],\
     \"cancelled\":[%s],\"repairs_used\":%d,\"attempts_total\":%d,\"abandoned\":%d,\
     \"settled\":%d,\"reserved\":%d,\"attempt_spend\":%d,\"outcome\":\"%s\"}"
    (String.concat "," (List.init n (fun i -> "\"" ^ status_name (s.st i) ^ "\"")))
    (ints s.act) (ints s.atts) (pairs s.passes) (pairs s.cancelled) s.repairs_used s.total
    s.abandoned s.settled s.reserved s.attempt_spend (outcome_name s.outc)

let event () =
  match next () with
  | "begin" -> Begin (int ()) | "refuse" -> Refuse (int ()) | "reserve" -> Reserve (int ())
  | "overrun" -> Overrun (int ())
  | "settle" -> let x = int () in
      let o = (match next () with "-" -> None | t -> Some (int_of_string t)) in Settle (x, o)
  | "verdict" -> let v = int () in Verdict (v, int () = 1)
  | "abandon" -> Abandon (int ()) | "claim" -> Claim (int ()) | "cancel" -> Cancel (int ())
  | "repair" -> let d = int () in Repair (d, int ())
  | "fail" -> Fail (int ()) | "finish" -> Finish
  | t -> failwith ("unknown event " ^ t)

let node_opt () = match next () with "-" -> None | t -> Some (int_of_string t)

let cevent () =
  match next () with
  | "begin" -> CBegin (int ()) | "refuse" -> CRefuse (int ())
  | "reserve" -> let x = int () in CReserve (x, node_opt ())
  | "overrun" -> let x = int () in COverrun (x, node_opt ())
  | "settle" -> let x = int () in
      let o = (match next () with "-" -> None | t -> Some (int_of_string t)) in
      CSettle (x, o, node_opt ())
  | "verdict" -> let v = int () in CVerdict (v, int () = 1)
  | "abandon" -> CAbandon (int ()) | "claim" -> CClaim (int ()) | "cancel" -> CCancel (int ())
  | "repair" -> let d = int () in CRepair (d, int ())
  | "fail" -> CFail (int ()) | "finish" -> CFinish
  | t -> failwith ("unknown event " ^ t)

let read_graph () =
  let n = int () in
  let k = int () in
  let b = (match next () with "-" -> None | t -> Some (int_of_string t)) in
  let nodes = Array.init n (fun _ ->
    let a = int () in let c = int () in let ns = list () in let rs = list () in (a, c, ns, rs)) in
  let get f i = if i >= 0 && i < n then f nodes.(i) else f (1, 0, [], []) in
  n, { size = n; attempts_of = get (fun (a, _, _, _) -> a);
       ceiling = get (fun (_, c, _, _) -> c); needs = get (fun (_, _, ns, _) -> ns);
       repairs = get (fun (_, _, _, rs) -> rs); repair_budget = k; spend_budget = b }

(* A concurrent state, with each node's account (and the variant's repair counters). *)
let json_cstate n s rep =
  let base = json_state n s.ctl in
  Printf.sprintf "%s,\"res\":[%s],\"spt\":[%s]%s}" (String.sub base 0 (String.length base - 1))
    (ints n s.res) (ints n s.spt)
    (match rep with None -> "" | Some r -> Printf.sprintf ",\"rep\":[%s]" (ints n r))

let cnormal n s = { ctl = normal n s.ctl; res = tab n s.res; spt = tab n s.spt }

let run_events m stepf show =
  let states = ref [show ()] and admitted = ref [] in
  for _ = 1 to m do
    admitted := (if stepf () then "true" else "false") :: !admitted;
    states := show () :: !states
  done;
  List.rev !admitted, List.rev !states

let serial_case () =
  let variant = next () in
  let stepf = match variant with
    | "real" -> step | "cancel_done" -> step_cancel_done
    | "begin_ignores_needs" -> step_begin_ignores_needs
    | "settle_tolerant" -> step_settle_tolerant
    | "ceiling_unchecked" -> step_ceiling_unchecked
    | t -> failwith ("unknown variant " ^ t) in
  let n, g = read_graph () in
  let m = int () in
  let s = ref (init g) in
  let admitted, states = run_events m
    (fun () -> let e = event () in
      match stepf g !s e with Some s' -> s := normal n s'; true | None -> false)
    (fun () -> json_state n !s) in
  w g, admitted, states

let concurrent_case () =
  let variant = next () in
  let mp = int () in
  let n, g0 = read_graph () in
  let g = { base = g0; max_parallel = mp } in
  let m = int () in
  let plain stepf =
    let s = ref (cinit g) in
    run_events m
      (fun () -> let e = cevent () in
        match stepf g !s e with Some s' -> s := cnormal n s'; true | None -> false)
      (fun () -> json_cstate n !s None) in
  let admitted, states = match variant with
    | "real" -> plain cstep
    | "check_then_reserve" -> plain check_then_reserve
    | "check_settled" -> plain check_settled
    | "repair_in_flight" -> plain repair_in_flight
    | "per_node_repairs" ->
        let y = ref (vinit g) in
        run_events m
          (fun () -> let e = cevent () in
            match per_node_repairs g !y e with
            | Some (s', r) -> y := (cnormal n s', tab n r); true
            | None -> false)
          (fun () -> json_cstate n (fst !y) (Some (snd !y)))
    | t -> failwith ("unknown variant " ^ t) in
  w g0, admitted, states

let () =
  while !tokens <> [] do
    let w, admitted, states = match next () with
      | "case" -> serial_case ()
      | "pcase" -> concurrent_case ()
      | t -> failwith ("expected case or pcase, got " ^ t) in
    Printf.printf "{\"W\":%d,\"admitted\":[%s],\"states\":[%s]}\n" w
      (String.concat "," admitted) (String.concat "," states)
  done
