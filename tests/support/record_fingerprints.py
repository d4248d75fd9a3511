"""The fingerprints of the record formats a change of a record type must update on purpose."""

from __future__ import annotations

FINGERPRINTS = {
    "loopproof-run/1": "5dd89d4a13333309c5f0d508152d104ad0c6fcef37c50d23db28ddba371b17e2",
    "loopproof-guard": "9605efe801252cf08cc770660f046998ca913335f2929bf4b41bb2c65b0e9dc5"}
