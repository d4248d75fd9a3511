"""The recovery rule (docs/ledger.md#torn-tails) over every offset of real ledgers.

Each ledger (4 and 12 run-shaped records written by `Ledger`, and the 16-record ledger of a
finished `examples/pipeline` run, tests/fixtures/ledgers/) is damaged at every offset with each of
0x00, 0x0a, 0x20, 0x7b, a deleted byte, a truncation, and zero-filled regions of several lengths
(plus zeros appended or after a cut), under each known-committed point it can have on disk: none
(a copy), the engine's mark after a crash inside the last append, the mark of a committed
ledger, and a signed head. For each damaged copy the class (`verified` / `torn-tail` /
`broken`) and the records kept must be what an oracle that knows the original lines says:

- a complete line that is not the original line at its place: `broken` there;
- a verified prefix below the committed point: `broken`;
- after the last newline: `torn-tail` exactly when the bytes, without trailing zeros, are a
  strict prefix of the next original line; anything else there is `broken`.

The class comes from the function `Ledger.open` and `verify` follow (`_scan`), run in memory on
every case; `Ledger.open` on a real file (the cut, the side file, nothing written when broken) on
every torn case of the small ledgers and a stride of the rest. What a test of this kind would
miss, and why it cannot: an open that cut a complete line would keep fewer records than the
oracle, and one that cut below the committed point would not be `broken`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopproof.engine.record.committed import Floor, Mark, mark_path, read_floor
from loopproof.engine.record.ledger import Ledger, _scan, classify, verify
from loopproof.engine.record.owned import LedgerLost
from loopproof.engine.record.signing import generate_keypair, sign_head
from loopproof.engine.system.errors import LedgerCorrupt
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "ledgers" / "pipeline-done.jsonl"
BYTES = (0x00, 0x0A, 0x20, 0x7B)
ZERO_RUNS = (1, 16, 512, 4096)


def run_shaped(path: Path, n: int) -> bytes:
    """A ledger of `n` records shaped like a run's (reserve/settle/verdict with floats, text)."""
    led = Ledger.create(path, {"type": "run", "format": 1, "graph": {"nodes": ["a", "b"]}})
    for i in range(1, n):
        kind = ("reserve", "settle", "verdict")[i % 3]
        led.append({"type": kind, "node": "ab"[i % 2], "amount": round(0.37 * i, 6),
                    "why": "é ✓ \"quoted\" \\ back", "attempt": i // 3})
    led.close()
    return path.read_bytes()


def damages(data: bytes, stride: int = 1) -> Iterator[tuple[str, bytes]]:
    """(what, damaged bytes) for every offset and every kind of damage (with `stride` > 1: 0x20
    and 0x7b at every third offset, zero-filled regions starting at every `stride`-th)."""
    n = len(data)
    for i in range(n):
        for b in BYTES if stride == 1 or i % 3 == 0 else BYTES[:2]:
            if data[i] != b:
                yield f"byte {i} -> {b:#04x}", data[:i] + bytes([b]) + data[i + 1:]
        yield f"byte {i} deleted", data[:i] + data[i + 1:]
        yield f"cut at {i}", data[:i]
        for run in ZERO_RUNS if i % stride == 0 else ():
            yield f"zeros {i}..{i + run}", data[:i] + b"\x00" * min(run, n - i) + data[i + run:]
        if i % 7 == 0:
            yield f"cut at {i}, then 512 zeros", data[:i] + b"\x00" * 512
            # a cut whose zero-filled block is followed by bytes that did reach the disk
            yield f"zeros {i}..{i + 16}, cut at {i + 40}", data[:i] + b"\x00" * 16 + data[
                i + 16:i + 40]
    yield "4096 zeros appended", data + b"\x00" * 4096


@dataclass(frozen=True)
class Expected:
    status: str
    records: int
    good: int  # bytes of the records kept


def oracle(lines: list[bytes], damaged: bytes, floor: Floor) -> Expected:
    """What the rule says, from the original lines alone (no code of the engine)."""
    *complete, tail = damaged.split(b"\n")
    k = good = 0
    for line in complete:
        if k < len(lines) and line + b"\n" == lines[k]:
            good += len(lines[k])
            k += 1
        else:
            return Expected("broken", k, good)
    if floor.records > k or floor.bytes > good:
        return Expected("broken", k, good)
    if not tail:
        return Expected("verified", k, good)
    body = tail.rstrip(b"\x00")
    if not body or (k < len(lines) and lines[k].startswith(body)):
        return Expected("torn-tail", k, good)
    return Expected("broken", k, good)


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory) -> dict[str, tuple[bytes, dict[str, Floor], Path]]:
    """Each ledger's bytes and its known-committed points, read from real side files."""
    folder = tmp_path_factory.mktemp("ledgers")
    out = {}
    for name, n in (("run4", 4), ("run12", 12), ("pipeline16", 16)):
        path = folder / f"{name}.jsonl"
        if name == "pipeline16":
            path.write_bytes(FIXTURE.read_bytes())
            Mark(path).set(len(FIXTURE.read_bytes()), 16)  # as the run left it
        data = run_shaped(path, n) if name != "pipeline16" else path.read_bytes()
        lines = data.splitlines(keepends=True)
        assert len(lines) == n
        floors = {"committed": read_floor(path)}
        Mark(path).set(len(data) - len(lines[-1]), n - 1)
        floors["crashed in the last append"] = read_floor(path)
        mark_path(path).unlink()
        floors["a copy"] = read_floor(path)
        if name != "run12":
            priv, pub = folder / f"{name}.key", folder / f"{name}.pub"
            generate_keypair(priv, pub)
            sign_head(path, priv)
            floors["signed"] = read_floor(path)
            Path(f"{path}.sig").rename(folder / f"{name}.sig.keep")
        assert floors["committed"] == Floor(len(data), n,
                                            f"the committed-length mark {name}.jsonl.committed")
        assert floors["a copy"] == Floor()
        out[name] = (data, floors, folder)
    return out


def _classify(damaged: bytes, floor: Floor):
    return classify(_scan(io.BytesIO(damaged), "l.jsonl", keep=False, floor=floor))


@pytest.mark.parametrize("name", ["run4", "run12", "pipeline16"])
def test_every_damage_at_every_offset_is_classed_by_the_rule(ledgers, name):
    data, floors, _ = ledgers[name]
    lines = data.splitlines(keepends=True)
    wrong: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    # the small ledger under every point; the larger ones each case under one point in turn
    # (every offset and damage is still classed; the budget of make check is a few CPU-s)
    chosen = floors
    names = list(floors)
    stride = {"run4": 1, "run12": 1, "pipeline16": 8}[name]
    for n, (what, damaged) in enumerate(damages(data, stride)):
        pick = floors.items() if name == "run4" else [(names[n % len(names)],
                                                       floors[names[n % len(names)]])]
        for where, floor in pick:
            want = oracle(lines, damaged, floor)
            got = _classify(damaged, floor)
            seen[where, want.status] = seen.get((where, want.status), 0) + 1
            if (got.status, got.records) != (want.status, want.records):
                wrong.append(f"{what} ({where}): {got.status} with {got.records} records, "
                             f"expected {want.status} with {want.records}")
            elif want.status == "broken" and not (got.error and "fix:" in got.error):
                wrong.append(f"{what} ({where}): broken without a message naming the fix")
    assert not wrong, f"{len(wrong)} cases wrong, e.g.:\n" + "\n".join(wrong[:12])
    # the enumeration reached every class under each point it can (a committed or signed
    # ledger can only lose zeros appended after its last record)
    assert seen["a copy", "torn-tail"] > 0 and seen["a copy", "broken"] > 0
    assert seen["crashed in the last append", "torn-tail"] > 0
    for where in chosen:
        if where in ("committed", "signed"):
            assert seen.get((where, "torn-tail"), 0) <= 1 and seen[where, "broken"] > 1000


@pytest.mark.parametrize("name, torn_stride, other_stride", [("run4", 5, 37),
                                                              ("pipeline16", 61, 401)])
def test_open_cuts_only_the_torn_part_and_keeps_it(ledgers, tmp_path, name, torn_stride,
                                                   other_stride):
    """`Ledger.open` on the real file: a torn tail is cut to exactly the complete records and
    kept in the side file; anything broken is refused with the file, and its folder, untouched."""
    data, floors, _ = ledgers[name]
    lines = data.splitlines(keepends=True)
    path = tmp_path / "l.jsonl"
    floor = floors["crashed in the last append"]
    wrong: list[str] = []
    checked = {"torn-tail": 0, "broken": 0, "verified": 0}
    counts = {"torn-tail": 0, "broken": 0, "verified": 0}
    for what, damaged in damages(data, 7):
        want = oracle(lines, damaged, floor)
        counts[want.status] += 1
        if counts[want.status] % (torn_stride if want.status == "torn-tail" else other_stride):
            continue
        for p in tmp_path.iterdir():
            p.unlink()
        path.write_bytes(damaged)
        Mark(path).set(floor.bytes, floor.records)
        before = sorted(p.name for p in tmp_path.iterdir())
        checked[want.status] += 1
        try:
            led = Ledger.open(path, keep=False)
        except LedgerCorrupt:
            if want.status != "broken":
                wrong.append(f"{what}: refused, expected {want.status}")
            elif path.read_bytes() != damaged or sorted(
                    p.name for p in tmp_path.iterdir()) != before:
                wrong.append(f"{what}: refused but changed the folder")
            continue
        led.close()
        kept = path.read_bytes()
        if want.status == "broken":
            wrong.append(f"{what}: opened, expected broken")
        elif len(led) != want.records or kept != data[:want.good]:
            wrong.append(f"{what}: kept {len(led)} records ({len(kept)} bytes), expected "
                         f"{want.records} ({want.good} bytes)")
        elif want.status == "torn-tail" and (
                led.torn_kept is None or (tmp_path / led.torn_kept).read_bytes()
                != damaged[want.good:] or b"\n" in damaged[want.good:]):
            wrong.append(f"{what}: the cut bytes are not kept whole in a side file")
        elif want.status == "verified" and kept != damaged:
            wrong.append(f"{what}: a verified ledger was changed")
    assert not wrong, f"{len(wrong)} cases wrong, e.g.:\n" + "\n".join(wrong[:12])
    assert checked["torn-tail"] > 0 and checked["broken"] > 0


def test_verify_on_the_file_follows_the_same_rule(ledgers, tmp_path):
    """`verify(path)` reads the mark beside the ledger and says what the in-memory scan says."""
    data, _, _ = ledgers["run4"]
    lines = data.splitlines(keepends=True)
    path = tmp_path / "l.jsonl"
    for what, damaged, mark, want in [
        ("last newline deleted, committed", data[:-1], (len(data), 4), "broken"),
        ("last newline deleted, crashed", data[:-1], (len(data) - len(lines[-1]), 3),
         "torn-tail"),
        ("second-to-last newline zeroed", data[:len(data) - len(lines[-1]) - 1] + b"\x00"
         + lines[-1], (0, 0), "broken"),
        ("cut at a record boundary, committed", b"".join(lines[:2]), (len(data), 4), "broken"),
    ]:
        path.write_bytes(damaged)
        Mark(path).set(*mark)
        assert verify(path).status == want, what


@pytest.mark.parametrize("line", [
    b'{"hash":"\\ud800"}\n',                      # a lone surrogate in the hash
    b'{"hash":"' + b"\\ud800" * 11 + b'","seq":0}\n',
    b"[" * 100_000 + b"\n",                      # nesting no parser allows
    b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
    b'{"seq":1e400,"hash":"' + b"0" * 64 + b'"}\n',  # numbers out of range
    b'{"seq":' + b"9" * 5000 + b"}\n",
    b'{"type":"\xff\xfe"}\n',                    # not UTF-8
    b'{"type":"\xed\xa0\x80"}\n',                # a surrogate encoded in UTF-8
])
def test_every_decode_problem_is_not_a_record(tmp_path, line, capsys):
    """Broken with a message, exit 5 from `loopproof verify`, never a traceback."""
    from loopproof.engine.cli import main as cli_main

    path = tmp_path / "l.jsonl"
    run_shaped(path, 3)
    mark_path(path).unlink()
    path.write_bytes(path.read_bytes() + line)
    v = verify(path)
    assert v.status == "broken" and v.records == 3 and "line 4" in v.error
    assert cli_main(["verify", str(path), "--json"]) == 5
    assert json.loads(capsys.readouterr().out)["status"] == "broken"
    path.write_bytes(path.read_bytes()[:-1])  # the same bytes as an unterminated tail
    assert verify(path).status in ("broken", "torn-tail")


@pytest.mark.parametrize("tail, torn", [
    (b'{"a":"\xc3', True),            # a character cut short inside a string
    (b'{"a":1}\xc2', False),          # ... after the object closed (found by make fuzz: the
    (b'{"a":\xc2', False),            # final newline of a ledger replaced by 0xc2)
    (b'{"\xe2\x9c', True),
    (b'{"a":1}', True),               # a complete record without its newline
    (b'{"a":1} ', False), (b'{"a":1}{', False), (b'{"a": 1', False), (b'[1', False),
    (b'{"a":1.', True), (b'{"a":1.e', False), (b'{"a":-', True), (b'{"a":tr', True),
    (b'{"a":tx', False), (b'{"a":01', False), (b'{"a":[1,2,]', False), (b'{"a":1,}', False),
    (b'{"\\u12', True), (b'{"a":"\xed\xa0\x80', False), (b'\x00\x00{"a"', False),
    (b'{"a"' + b"\x00" * 9, True), (b"\x00" * 9, True), (b'{"a":"\x01', False),
    (b'{"a":' + b"[" * 1001, False), (b'{"a":' + b"[" * 999, True),
])
def test_what_counts_as_a_record_cut_short(tail, torn):
    from loopproof.engine.record.tail import is_cut_short

    assert is_cut_short(tail) is torn


def test_a_long_unterminated_tail_is_read_in_linear_time(tmp_path):
    """32 MB without a newline: read once (the old reader joined each block to all before it)."""
    import time

    path = tmp_path / "l.jsonl"
    run_shaped(path, 3)
    mark_path(path).unlink()
    with path.open("ab") as f:
        f.write(b'{"type":"x","pad":"' + b"y" * (32 << 20))
    start = time.process_time()
    v = verify(path)
    spent = time.process_time() - start
    assert v.status == "torn-tail" and v.records == 3
    assert spent < 5.0, f"verify took {spent:.1f} CPU-s on a 32 MB tail"


def test_the_ledger_is_looked_up_once(tmp_path, monkeypatch):
    """A ledger swapped in at the path between the scan and the cut is never cut or appended
    to: the scan, the cut and the appends go through the one descriptor opened first."""
    import loopproof.engine.record.ledger as ledger_mod

    path, other = tmp_path / "l.jsonl", tmp_path / "other.jsonl"
    run_shaped(path, 3)
    Mark(path).set(len(path.read_bytes()), 3)
    path.write_bytes(path.read_bytes() + b'{"type":"half')
    run_shaped(other, 5)
    swapped = other.read_bytes()
    real = ledger_mod._scan

    def scan_then_swap(*args, **kwargs):
        found = real(*args, **kwargs)
        other.rename(path)  # another file now at the path
        return found

    monkeypatch.setattr(ledger_mod, "_scan", scan_then_swap)
    led = Ledger.open(path)
    assert len(led) == 3 and led.torn  # the file scanned was cut, through its descriptor
    with pytest.raises(LedgerLost, match="another file"):
        led.append({"type": "after"})  # and nothing is appended to the one swapped in
    assert path.read_bytes() == swapped  # the file at the path was not touched


def test_a_signed_ledger_is_never_cut_below_its_signed_head(tmp_path):
    """The old order cut first and checked the signature after, so `resume` refused a cut it
    had made itself ("fewer than the 16 signed") with the evidence gone. The signed count is a
    committed point: read before cutting, the file refused and left whole."""
    path = tmp_path / "l.jsonl"
    data = run_shaped(path, 6)
    priv, pub = tmp_path / "k", tmp_path / "k.pub"
    generate_keypair(priv, pub)
    sign_head(path, priv)
    mark_path(path).unlink()  # the signature alone holds the committed point here
    path.write_bytes(data[:-1])  # the signed head's newline lost: looks like a torn write
    with pytest.raises(LedgerCorrupt, match=r"6 records .* were committed \(the signed head l\.jsonl\.sig\)"):
        Ledger.open(path)
    assert path.read_bytes() == data[:-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k", "k.pub", "l.jsonl", "l.jsonl.sig"]
