"""Small synthetic gate catalogues for the audit tests: each gate is a few lines of stdlib Python."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

PRELUDE = """\
import json, sys
from pathlib import Path
WS = Path(sys.argv[1])
def read(name):
    return (WS / name).read_text() if (WS / name).exists() else None
def verdict(ok):
    sys.exit(0 if ok else 1)
"""

SOLUTION = 'def add(a, b):\n    """Add two numbers."""\n    return a + b\n'
SOUND = """\
src = read("solution.py")
ns = {}
exec(src, ns)
verdict(ns["add"](2, 3) == 5 and ns["add"](-1, 1) == 0 and ns["add"](10, 5) == 15)
"""


def make_loop(root: Path, loop_id: str, gate: str, workspace: dict[str, str] | None = None,
              artifact: list[str] | None = None, oracle: str | None = SOUND,
              repaired: str | None = None, timeout: float = 5) -> Path:
    """Write <root>/<loop_id>/ with loop.toml, workspace/, gate/ (and gate.repaired/)."""
    folder = root / loop_id
    workspace = workspace if workspace is not None else {"solution.py": SOLUTION}
    for name, text in workspace.items():
        (folder / "workspace" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "workspace" / name).write_text(text)
    (folder / "gate").mkdir(parents=True)
    (folder / "gate" / "check.py").write_text(PRELUDE + textwrap.dedent(gate))
    lines = ["[loop]", f"id = {json.dumps(loop_id)}", 'description = "a synthetic test gate"',
             "[gate]", 'run = ["{python}", "-I", "-S", "{gate}/check.py", "{workspace}"]',
             f"timeout_s = {timeout}", "[artifact]",
             f"files = {json.dumps(artifact or ['solution.py'])}"]
    if oracle is not None:
        (folder / "gate" / "oracle.py").write_text(PRELUDE + textwrap.dedent(oracle))
        lines += ["[oracle]", 'run = ["{python}", "-I", "-S", "{gate}/oracle.py", "{workspace}"]']
    if repaired is not None:
        (folder / "gate.repaired").mkdir()
        (folder / "gate.repaired" / "check.py").write_text(PRELUDE + textwrap.dedent(repaired))
        if oracle is not None:
            (folder / "gate.repaired" / "oracle.py").write_text(PRELUDE + textwrap.dedent(oracle))
    (folder / "loop.toml").write_text("\n".join(lines) + "\n")
    return folder
