"""A refusal as a careless user must see it: one line naming the field and the fix, the exit code,
and nothing written or changed."""

from __future__ import annotations

from pathlib import Path

from loopproof.engine.cli import main


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def refused(capsys, argv: list[str], root: Path, *named: str, entry=main, code_: int = 2) -> str:
    """Run `entry(argv)`; it must exit `code_` (2: bad input) with one line naming `named` and a
    fix, and leave `root` as it was. (Exit 5 of `verify` is its report, on stdout.)"""
    before = snapshot(root)
    try:
        code = entry(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    out = capsys.readouterr()
    err = out.err + (out.out if code == 5 else "")
    lines = err.strip().splitlines()
    assert code == code_ and len(lines) == 1, (code, err)
    assert "fix:" in err and "Traceback" not in err, err
    for word in named:
        assert word in err, (word, err)
    assert snapshot(root) == before, "something was written or changed"
    return err
