"""Optional Ed25519 signature over the ledger head, for an attacker the hash chain cannot stop.

Why: anyone who can write the ledger can rewrite it and recompute every hash (or cut it at a
record boundary); the chain then verifies. A signature over (record count, head hash), made
with a private key kept outside every worker's reach (its path is in the policy's [signing]),
ties the ledger to the key holder: a rewrite or a truncation no longer matches the signed head.

The signature lives in a sidecar file `<ledger>.sig` (JSON), so the ledger's records, and replay,
are unchanged. `loopproof verify LEDGER --public-key PUB` checks chain and signature together.
The signature must cover the whole ledger: records after the signed head are reported as broken
(sign again after appending). A torn tail after the signed head is still a torn tail.

    python -m loopproof.engine.record.signing keygen --private KEY.pem --public KEY.pub
    python -m loopproof.engine.record.signing sign LEDGER --key KEY.pem
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from loopproof.engine.record.ledger import (
    Ledger,
    Verification,
    _read,
    _scan,
    read_floor_or_broken,
)
from loopproof.engine.system.canonical import canonical
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from loopproof.engine.system.exits import Exit

DOMAIN = b"loopproof-ledger-head-v1\n"


def sidecar_path(ledger: Path | str) -> Path:
    return Path(f"{ledger}.sig")


def message(records: int, head: str) -> bytes:
    """The signed bytes: a domain tag, then the canonical (records, head) pair."""
    return DOMAIN + canonical({"head": head, "records": records})


def generate_keypair(private_path: Path | str, public_path: Path | str) -> None:
    """Write a new Ed25519 key pair (PEM); the private file is created 0600 and never overwritten."""
    private_path, public_path = Path(private_path), Path(public_path)
    if private_path.absolute() == public_path.absolute():
        raise BadInput(str(private_path), "key", "--private and --public are the same path",
                       "give the public key a path of its own")
    for p in (private_path, public_path):
        if os.path.lexists(p):
            raise BadInput(str(p), "key", "already exists", "choose a new path; keys are never "
                           "overwritten")
        if not p.parent.is_dir():
            raise BadInput(str(p), "key", f"its folder {p.parent} does not exist",
                           "create the folder first (private keys: one only you can read) or "
                           "choose another path")
    key = Ed25519PrivateKey.generate()
    pems = ((private_path, 0o600, key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption())),
            (public_path, 0o644, key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)))
    written: list[Path] = []
    path = private_path
    try:
        for path, mode, pem in pems:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            written.append(path)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
    except OSError as exc:  # a read-only folder, a full disk: no half of a pair is left behind
        for done in written:
            done.unlink(missing_ok=True)
        raise BadInput(str(path), "key", f"cannot be written ({exc.strerror or exc})",
                       "choose a folder you can write to; nothing was kept") from None


def _load_private(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except FileNotFoundError:
        raise BadInput(str(path), "signing.private_key", "file not found",
                       "generate one with `python -m loopproof.engine.record.signing keygen`") from None
    except OSError as exc:
        raise BadInput(str(path), "signing.private_key", f"cannot be read ({exc.strerror or exc})",
                       "run as the key's owner; the key must stay out of the workers' reach"
                       ) from None
    except (ValueError, TypeError) as exc:
        raise BadInput(str(path), "signing.private_key", f"is not an unencrypted PEM key ({exc})",
                       "generate one with `python -m loopproof.engine.record.signing keygen`") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(str(path), "signing.private_key", "is not an Ed25519 key",
                       "generate one with `python -m loopproof.engine.record.signing keygen`")
    return key


def _load_public(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except FileNotFoundError:
        raise BadInput(str(path), "--public-key", "file not found",
                       "give the public key written by `python -m loopproof.engine.record.signing keygen`"
                       ) from None
    except OSError as exc:
        raise BadInput(str(path), "--public-key", f"cannot be read ({exc.strerror or exc})",
                       "give a readable public key file") from None
    except (ValueError, TypeError) as exc:
        raise BadInput(str(path), "--public-key", f"is not a PEM public key ({exc})",
                       "give the public key written by `python -m loopproof.engine.record.signing keygen`"
                       ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(str(path), "--public-key", "is not an Ed25519 key",
                       "give the public key written by `python -m loopproof.engine.record.signing keygen`")
    return key


def sign_head(ledger: Path | str, private_key: Path | str) -> dict[str, Any]:
    """Sign the current head of a verified ledger; write and return the sidecar."""
    ledger = Path(ledger)
    key = _load_private(Path(private_key))
    scan = _scan(_read(ledger), str(ledger), keep=False)
    if scan.error:
        raise LedgerCorrupt(scan.error)
    if scan.torn:
        raise BadInput(str(ledger), "ledger", "ends in a torn line",
                       "open it (Ledger.open / loopproof resume) to truncate the tail, then sign")
    signature = key.sign(message(scan.count, scan.head))
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    side = {"format": 1, "records": scan.count, "head": scan.head, "signature": signature.hex(),
            "public_key": pub.hex()}
    _write_sidecar(ledger, side)
    return side


def _write_sidecar(ledger: Path, side: dict[str, Any]) -> None:
    target = sidecar_path(ledger)
    tmp = Path(f"{target}.tmp")
    tmp.write_text(json.dumps(side, sort_keys=True) + "\n")
    os.replace(tmp, target)


def sign_written(ledger: Ledger, private_key: Path | str, path: Path | None = None) -> dict[str, Any]:
    """Sign the head the engine wrote (count and head from memory, never read back from the
    path), after `verify_owned` shows the file on disk is exactly that chain (LedgerLost if not).
    The sidecar goes next to `path` (default: the ledger's own path)."""
    key = _load_private(Path(private_key))
    ledger.verify_owned()
    count, head = len(ledger), ledger.head
    signature = key.sign(message(count, head))
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    side = {"format": 1, "records": count, "head": head, "signature": signature.hex(),
            "public_key": pub.hex()}
    _write_sidecar(Path(path or ledger.path), side)
    return side


def check_extends_signed(ledger: Path | str, count: int,
                         public_key: Path | str | None) -> dict[str, Any] | None:
    """Before a signed run is resumed (or re-signed): the sidecar's signature verifies — with
    `public_key` (the run's policy key) when given, else with the key the sidecar names — and
    the ledger's `count` verified records extend the signed head (the record at the signed
    count is the signed head; read from the file, which the caller has just verified). Raises LedgerCorrupt otherwise; with a key, a missing sidecar is refused too
    (a signed run is signed from its first record on). Returns the sidecar, or None when there
    is none and no key is asked for."""
    ledger = Path(ledger)
    where = sidecar_path(ledger)
    fix = ("fix: restore the ledger and its signature from a trusted copy; "
           "`loopproof verify LEDGER --public-key PUB` says what differs")
    try:
        side: dict[str, Any] = json.loads(where.read_text())
        signed_records, signed_head = int(side["records"]), str(side["head"])
        signature = bytes.fromhex(side["signature"])
        embedded = bytes.fromhex(side.get("public_key", ""))
    except FileNotFoundError:
        if public_key is None:
            return None
        raise LedgerCorrupt(f"{where}: the run's policy signs its ledger, but the signature file "
                            f"is missing, so the ledger cannot be shown to be the one signed; "
                            f"{fix}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise LedgerCorrupt(f"{where}: signature file is not valid (records, head, signature); "
                            f"{fix}") from None
    try:
        if public_key is not None:
            key = _load_public(Path(public_key))
        else:
            key = Ed25519PublicKey.from_public_bytes(embedded)
        key.verify(signature, message(signed_records, signed_head))
    except (InvalidSignature, ValueError):
        raise LedgerCorrupt(f"{where}: the signature does not verify (signature or head "
                            f"rewritten, or another key); {fix}") from None
    if not 1 <= signed_records <= count:
        raise LedgerCorrupt(f"{ledger}: the ledger has {count} records, fewer than the "
                            f"{signed_records} signed (it was cut or rewritten); {fix}")
    if _hash_at(ledger, signed_records - 1) != signed_head:
        raise LedgerCorrupt(f"{ledger}: record {signed_records - 1} is not the signed head: the "
                            f"ledger does not extend the chain that was signed (it was "
                            f"rewritten); {fix}")
    return side


def _hash_at(ledger: Path, index: int) -> str | None:
    """The `hash` of record `index` of a verified ledger (line `index`, streamed)."""
    with _read(ledger) as f:
        for i, line in enumerate(f):
            if i == index:
                try:
                    return str(json.loads(line).get("hash"))
                except (ValueError, AttributeError):
                    return None
    return None


def verify_signed(ledger: Path | str, public_key: Path | str) -> Verification:
    """The chain check, then: the sidecar's signature is valid for `public_key` and covers
    exactly the verified records (same count, same head)."""
    ledger = Path(ledger)
    key = _load_public(Path(public_key))
    floor = read_floor_or_broken(ledger, signed=False)
    if isinstance(floor, Verification):
        return floor
    scan = _scan(_read(ledger), str(ledger), keep=False, floor=floor)
    count = scan.count
    if scan.error:
        return Verification("broken", count, scan.head, scan.error)
    where = str(sidecar_path(ledger))

    def broken(problem: str) -> Verification:
        return Verification("broken", count, scan.head,
                            f"{where}: {problem}; fix: restore the ledger and its signature from "
                            f"a trusted copy")

    try:
        side = json.loads(sidecar_path(ledger).read_text())
        signed_records, signed_head = int(side["records"]), str(side["head"])
        signature = bytes.fromhex(side["signature"])
    except FileNotFoundError:
        return broken("no signature file, so the head cannot be checked against the key")
    except (ValueError, KeyError, TypeError):
        return broken("signature file is not valid (records, head, signature)")
    try:
        key.verify(signature, message(signed_records, signed_head))
    except InvalidSignature:
        return broken("signature does not verify with this public key (signature or head "
                      "rewritten, or another key)")
    if signed_records != count:
        what = "fewer" if count < signed_records else "more"
        return broken(f"the ledger has {count} verified records, {what} than the {signed_records} "
                      f"the signature covers (truncated, or appended after signing)")
    if scan.head != signed_head:  # same count, so scan.head is the hash of the signed record
        return broken("the ledger's head is not the signed head (the ledger was rewritten)")
    if scan.torn:
        return Verification("torn-tail", count, scan.head, scan.torn)
    return Verification("verified", count, scan.head, None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loopproof.engine.record.signing", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("keygen", help="write a new Ed25519 key pair")
    k.add_argument("--private", type=Path, required=True)
    k.add_argument("--public", type=Path, required=True)
    s = sub.add_parser("sign", help="sign a ledger's head (writes LEDGER.sig)")
    s.add_argument("ledger", type=Path)
    s.add_argument("--key", type=Path, required=True)
    args = p.parse_args(argv)
    try:
        if args.cmd == "keygen":
            generate_keypair(args.private, args.public)
            print(f"wrote {args.private} (keep it outside every workspace) and {args.public}")
        else:
            side = sign_head(args.ledger, args.key)
            print(f"signed {args.ledger}: {side['records']} records, head {side['head'][:16]}")
    except BadInput as exc:
        print(f"loopproof.engine.record.signing: {exc}", file=sys.stderr)
        return Exit.BAD_INPUT
    except LedgerCorrupt as exc:
        print(f"loopproof.engine.record.signing: ledger corrupt: {exc}", file=sys.stderr)
        return Exit.CORRUPT
    return Exit.OK


if __name__ == "__main__":
    sys.exit(main())
