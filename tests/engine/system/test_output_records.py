"""Output records tell the truth: the true byte count and SHA-256 of the whole stream, its head,
and its real last 4 KiB, however much a worker or a gate wrote (the capture keeps only the first
MiB in memory; a record built from that said "1048576 bytes" with a tail from the first MiB)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loopproof.engine import cli
from loopproof.engine.system.process import HEAD_BYTES, TAIL_BYTES, _decode, run_command
from tests.support.specs import command_node, write_spec

ECHO = [sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"]
# 5 MB: well past the 1 MiB kept in memory; multi-byte characters at both cuts
BIG = ("é" * 1500 + "x" * 5_000_000 + "€" * 700 + "THE END\n").encode()
WRITER = ("import sys\nsys.stdout.buffer.write('\u00e9'.encode() * 1500 + b'x' * 5_000_000 + "
          "'\u20ac'.encode() * 700 + b'THE END\\n')\nsys.stderr.write('warned')\n")


@settings(max_examples=25)
@given(data=st.binary(max_size=3 * (HEAD_BYTES + TAIL_BYTES)) | st.text(max_size=4000).map(
    lambda t: t.encode()), big=st.integers(0, 3))
def test_a_record_is_the_whole_stream_head_and_real_tail(tmp_path_factory, data: bytes,
                                                         big: int) -> None:
    data = data * (1 + big * 500)  # sometimes past the 1 MiB kept in memory
    res = run_command(ECHO, tmp_path_factory.getbasetemp(), 60, stdin=data)
    rec = res.stream("stdout").record()
    last = data[-TAIL_BYTES:]
    first = data[:min(HEAD_BYTES, len(data) - len(last))]
    assert rec == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                   "head": _decode(first, cut="end"),
                   "tail": _decode(last, cut="start" if len(data) > len(last) else "none"),
                   "omitted": len(data) - len(first) - len(last)}
    if len(data) <= TAIL_BYTES:  # a short stream is all in its tail, as it was written
        assert rec["tail"] == data.decode("utf-8", "replace") and rec["head"] == ""
    assert "\ufffd" not in rec["head"] + rec["tail"] or "\ufffd" in data.decode("utf-8", "replace")


def test_a_worker_that_writes_megabytes_is_recorded_as_it_wrote(tmp_path: Path, capsys) -> None:
    (tmp_path / "writer.py").write_text(WRITER)
    spec = write_spec(tmp_path, {"a": command_node(["python3", "writer.py"], ["python3", "writer.py"],
                                                   spend_ceiling=60.0, timeout_s=30,
                                                   gate_timeout_s=30)}, spend_budget=100.0)
    ledger = tmp_path / "L.jsonl"
    assert cli.main(["run", str(spec), "--ledger", str(ledger), "--json"]) == 0
    recs = [json.loads(x) for x in ledger.read_text().splitlines()]
    claim = next(r for r in recs if r["type"] == "claim")["claims"]
    out = claim["stdout"]
    assert out["bytes"] == len(BIG) and out["sha256"] == hashlib.sha256(BIG).hexdigest()
    assert out["tail"].endswith("€" * 10 + "THE END\n") and out["head"].startswith("é" * 100)
    assert out["head"] == "é" * (HEAD_BYTES // 2) and len(out["tail"].encode()) <= TAIL_BYTES
    assert out["tail"] == BIG[-TAIL_BYTES:].decode("utf-8", "replace").lstrip("\ufffd")
    assert out["omitted"] == len(BIG) - HEAD_BYTES - TAIL_BYTES
    assert claim["stderr"]["tail"] == "warned" and claim["output_truncated"] is True

    verdict = next(r for r in recs if r["type"] == "verdict")
    gate_out = verdict["output"]["stdout"]
    assert gate_out["bytes"] == len(BIG) and gate_out["tail"].endswith("THE END\n")
    assert verdict["exit"] == 0 and verdict["detail"].startswith("exit 0; ...")
    assert verdict["detail"].endswith("THE END\nwarned")  # the real end of what the gate said
    assert len(verdict["detail"]) == 2000

    capsys.readouterr()
    cli.main(["show", str(ledger)])
    text = capsys.readouterr().out
    assert f"stdout ({len(BIG):,} bytes)" in text
    assert "gate: accept (exit 0)" in text
    gate_lines = [ln for ln in text.splitlines() if ln.lstrip().startswith("| ")]
    assert gate_lines[-2].endswith("THE END") and gate_lines[-1].endswith("| warned")
    assert max(len(ln) for ln in text.splitlines()) < 200  # one line per line of a terminal
