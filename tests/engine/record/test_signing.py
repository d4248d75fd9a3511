"""loopproof.engine.record.signing: a signed head catches the full-rewrite and truncation attacks the chain alone
cannot; keys and signature files are checked as bad input."""

from __future__ import annotations

import json
import stat

import pytest

from loopproof.engine.policy.pin import load_policy, sign_with_policy
from loopproof.engine.record.committed import mark_path
from loopproof.engine.record.ledger import Ledger, verify
from loopproof.engine.record.signing import (
    generate_keypair,
    sidecar_path,
    sign_head,
    verify_signed,
)
from loopproof.engine.record.signing import (
    main as signing_main,
)
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from tests.support.oracles import rewrite


@pytest.fixture
def keys(tmp_path):
    priv, pub = tmp_path / "keys" / "run.key", tmp_path / "keys" / "run.pub"
    priv.parent.mkdir()
    generate_keypair(priv, pub)
    return priv, pub


def signed_ledger(tmp_path, priv, n=6):
    path = tmp_path / "l.jsonl"
    led = Ledger.create(path, {"type": "run_start"})
    for i in range(1, n):
        led.append({"type": "attempt", "i": i, "spend": 1.5})
    led.close()
    sign_head(path, priv)
    return path


def test_keygen_is_private_and_never_overwrites(keys):
    priv, pub = keys
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in priv.read_bytes() and b"PUBLIC KEY" in pub.read_bytes()
    with pytest.raises(BadInput, match="already exists"):
        generate_keypair(priv, pub.with_name("other.pub"))


def test_signed_ledger_verifies(tmp_path, keys):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)
    v = verify_signed(path, pub)
    assert v.status == "verified" and v.records == 6 and v.error is None


def test_full_rewrite_passes_the_chain_but_not_the_signature(tmp_path, keys):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)

    def edit(recs):
        recs[3]["spend"] = 0.0
        return recs

    rewrite(path, edit)
    assert verify(path).status == "verified"  # undetectable without signing
    v = verify_signed(path, pub)
    assert v.status == "broken" and "not the signed head" in v.error


def test_rewrite_and_resign_with_own_key_is_caught(tmp_path, keys):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)
    rewrite(path, lambda recs: recs[:-1] + [{"type": "attempt", "i": 99, "spend": 0.0}])
    other_priv, other_pub = tmp_path / "evil.key", tmp_path / "evil.pub"
    generate_keypair(other_priv, other_pub)
    sign_head(path, other_priv)
    assert verify_signed(path, other_pub).status == "verified"
    v = verify_signed(path, pub)
    assert v.status == "broken" and "does not verify with this public key" in v.error


@pytest.mark.parametrize("cut, word", [(2, "fewer"), (-1, "more")])
def test_truncation_and_unsigned_appends_are_caught(tmp_path, keys, cut, word):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)
    if cut > 0:
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-cut]))
        assert verify(path).status == "broken"  # the mark beside it says more was committed
        mark_path(path).unlink()  # an attacker removes that too: only the signature is left
    else:
        led = Ledger.open(path)
        led.append({"type": "forged"})
        led.close()
    assert verify(path).status == "verified"
    v = verify_signed(path, pub)
    assert v.status == "broken" and word in v.error


def test_missing_or_garbled_signature_is_broken(tmp_path, keys):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)
    side = sidecar_path(path)
    side.write_text("{not json")
    assert "not valid" in verify_signed(path, pub).error
    side.unlink()
    assert "no signature file" in verify_signed(path, pub).error


def test_torn_tail_after_signed_head_is_still_torn(tmp_path, keys):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)
    with open(path, "ab") as f:
        f.write(b'{"hash":"ab')
    assert verify_signed(path, pub).status == "torn-tail"
    with pytest.raises(BadInput, match="torn"):
        sign_head(path, priv)


def test_sign_refuses_a_broken_ledger_and_bad_keys(tmp_path, keys):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)
    with pytest.raises(BadInput, match="signing.private_key: file not found"):
        sign_head(path, tmp_path / "none.key")
    with pytest.raises(BadInput, match="is not an unencrypted PEM key"):
        sign_head(path, pub)
    with pytest.raises(BadInput, match="--public-key: is not a PEM public key"):
        verify_signed(path, priv)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(LedgerCorrupt, match="line 3"):
        sign_head(path, priv)
    assert verify_signed(path, pub).status == "broken"


def cli_main(argv):
    """`loopproof verify` without importing every other subcommand (the CLI wiring and its exit
    codes for bad input are tested in test_ledger.py)."""
    import argparse

    from loopproof.engine.commands import verify as command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        return command.main(args)
    except BadInput:
        return 2


def test_cli_verify_with_public_key(tmp_path, keys, capsys):
    priv, pub = keys
    path = signed_ledger(tmp_path, priv)
    assert cli_main(["verify", str(path), "--public-key", str(pub), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "verified"
    rewrite(path, lambda recs: recs)  # identical content: same hashes, still verifies
    assert cli_main(["verify", str(path), "--public-key", str(pub), "--json"]) == 0
    capsys.readouterr()
    rewrite(path, lambda recs: recs[:3])
    assert cli_main(["verify", str(path), "--json"]) == 0
    capsys.readouterr()
    assert cli_main(["verify", str(path), "--public-key", str(pub), "--json"]) == 5
    assert json.loads(capsys.readouterr().out)["status"] == "broken"
    assert cli_main(["verify", str(path), "--public-key", str(tmp_path / "no.pub")]) == 2


def test_signing_module_cli_and_policy_key(tmp_path, capsys):
    priv, pub = tmp_path / "k.pem", tmp_path / "k.pub"
    assert signing_main(["keygen", "--private", str(priv), "--public", str(pub)]) == 0
    assert signing_main(["keygen", "--private", str(priv), "--public", str(pub)]) == 2
    path = tmp_path / "l.jsonl"
    Ledger.create(path, {"type": "run_start"}).close()
    (tmp_path / "gate.py").write_text("pass\n")
    (tmp_path / "policy.toml").write_text(
        '[policy]\ngoals = ["g"]\nscope = ["."]\n[gate]\nfiles = ["gate.py"]\n'
        '[budget]\nspend = 1.0\nrepairs = 0\n'
        '[release]\nconditions = ["all_done", "signed"]\n'
        f'[signing]\nprivate_key = "{priv.name}"\npublic_key = "{pub.name}"\n')
    policy = load_policy(tmp_path / "policy.toml")
    assert sign_with_policy(path, policy)["records"] == 1
    assert verify_signed(path, pub).status == "verified"
    assert signing_main(["sign", str(path), "--key", str(priv)]) == 0
    assert signing_main(["sign", str(tmp_path / "none.jsonl"), "--key", str(priv)]) == 2
