"""Rewrite trials: an attacker with write access re-chains the ledger. The chain alone cannot
see it (`undetectable_without_signing`); a signed head can (`caught_with_signing`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from experiments.integrity.records import Row, clean, lines, rehash, run_records, write_ledger
from experiments.integrity.tamper import edit_value
from loopproof.engine.record.committed import mark_path
from loopproof.engine.record.ledger import verify
from loopproof.engine.record.signing import sign_head, verify_signed

# ---- the full-rewrite attacker -----------------------------------------------------------------------

def _rechain(recs: list[dict]) -> bytes:
    prev, out = "", []
    for seq, r in enumerate(recs):
        r = {k: v for k, v in r.items() if k != "hash"}
        r["seq"], r["prev"] = seq, prev
        out.append(rehash(r))
        prev = json.loads(out[-1])["hash"]
    return b"".join(out)


def _keys(rng: random.Random, folder: Path) -> tuple[Path, Path]:
    """A key pair drawn from the seed (so the whole experiment replays exactly)."""
    key = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
    priv, pub = folder / "run.key", folder / "run.pub"
    priv.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    return priv, pub


REWRITES = ("full_rewrite", "truncate_at_record_boundary", "edit_and_rehash_last")


def rewrite_trial(tid: str, kind: str, rng: random.Random, folder: Path) -> Row:
    path = folder / "run.jsonl"
    base = write_ledger(path, run_records(rng, tid))
    priv, pub = _keys(rng, folder)
    sign_head(path, priv)
    recs = [json.loads(line) for line in lines(base)]
    if kind == "full_rewrite":
        i = rng.randrange(len(recs))
        key = edit_value(rng, recs[i])
        path.write_bytes(_rechain(recs))
        target = f"line {i + 1} field {key}; every later hash recomputed"
    elif kind == "truncate_at_record_boundary":
        k = rng.randint(1, len(recs) - 1)
        path.write_bytes(b"".join(lines(base)[:k]))
        target = f"cut to the first {k} of {len(recs)} records"
    else:
        key = edit_value(rng, recs[-1])
        recs[-1].pop("hash")
        path.write_bytes(b"".join(lines(base)[:-1]) + rehash(recs[-1]))
        target = f"last line field {key}, re-hashed"
    mark_path(path).unlink()  # the attacker rewrites the committed-length mark too (it guards
    plain = verify(path)       # against crashes): only the signature can show the rewrite
    signed = verify_signed(path, pub)
    return Row(tid, "rewrite", kind, len(recs), target,
               "verified without signing (undetectable); broken with the signed head",
               plain.status, signed.status == "broken", signed.status,
               clean(signed.error or "", folder))
