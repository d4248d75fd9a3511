"""The fingerprints of the record formats a change of a record type must update on purpose."""

from __future__ import annotations

# What a reader of loopproof-run/1 relies on (types, required fields and their types). An
# optional field added keeps it; anything else is a new format: give it a new name, keep this one.
FINGERPRINTS = {
    "loopproof-run/1": "6176bc5ac7994338827c2e795f7e0ed7e2f57dae28571ea5b813205af666e403",
    "loopproof-guard": "9605efe801252cf08cc770660f046998ca913335f2929bf4b41bb2c65b0e9dc5"}
