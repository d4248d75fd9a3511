(* Drives the step function and W extracted from Loopproof.v (extracted.ml) for the differential
   test (tests/proofs/test_coq_model.py).  Reads cases from stdin, whitespace-separated tokens:
     case VARIANT N K B          B an integer number of quanta, or - for unbounded
       N times: A C NNEEDS needs... NREPAIRS repairs...     (node indices, topological order)
       M, then M events: begin V | refuse V | reserve X | overrun X | settle X (O|-)
         | verdict V (0|1) | abandon V | claim V | cancel V | repair D U | fail V | finish
   and prints one JSON line per case: {"W": W, "states": [init, ...], "admitted": [...]}: after
   a disabled event the state stays (as the Python model's Disabled leaves it).  The glue only
   parses, tabulates a state's functions on 0..N-1 (so a long run does not build long closure
   chains) and prints. *)
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

let json_state n s =
  let ints f = String.concat "," (List.init n (fun i -> string_of_int (f i))) in
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

let () =
  while !tokens <> [] do
    (match next () with "case" -> () | t -> failwith ("expected case, got " ^ t));
    let variant = next () in
    let stepf = match variant with
      | "real" -> step | "cancel_done" -> step_cancel_done
      | "begin_ignores_needs" -> step_begin_ignores_needs
      | "settle_tolerant" -> step_settle_tolerant
      | "ceiling_unchecked" -> step_ceiling_unchecked
      | t -> failwith ("unknown variant " ^ t) in
    let n = int () in
    let k = int () in
    let b = (match next () with "-" -> None | t -> Some (int_of_string t)) in
    let nodes = Array.init n (fun _ ->
      let a = int () in let c = int () in let ns = list () in let rs = list () in (a, c, ns, rs)) in
    let get f i = if i >= 0 && i < n then f nodes.(i) else f (1, 0, [], []) in
    let g = { size = n; attempts_of = get (fun (a, _, _, _) -> a);
              ceiling = get (fun (_, c, _, _) -> c); needs = get (fun (_, _, ns, _) -> ns);
              repairs = get (fun (_, _, _, rs) -> rs); repair_budget = k; spend_budget = b } in
    let m = int () in
    let s = ref (init g) in
    let states = ref [json_state n !s] and admitted = ref [] in
    for _ = 1 to m do
      let e = event () in
      (match stepf g !s e with
       | Some s' -> s := normal n s'; admitted := "true" :: !admitted
       | None -> admitted := "false" :: !admitted);
      states := json_state n !s :: !states
    done;
    Printf.printf "{\"W\":%d,\"admitted\":[%s],\"states\":[%s]}\n" (w g)
      (String.concat "," (List.rev !admitted)) (String.concat "," (List.rev !states))
  done
