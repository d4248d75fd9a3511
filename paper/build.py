"""paper/build/loopproof.pdf from paper/main.tex with latexmk, after the generated files are
written, and what a reader would stumble on read back from LaTeX's log: an undefined reference
or citation ('??' in the PDF) and a box that runs into the margin.

Why here and not only in the Makefile: `make paper` and the last step of `make reproduce` run the
same build, and its one-line summary (pages, macros) is read from the log, not guessed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PAPER = Path(__file__).resolve().parent
JOB = "loopproof"
INSTALL = ("sudo apt-get install texlive-latex-recommended texlive-fonts-recommended "
           "latexmk")
# A box this much wider than its line shows as text running into the margin.
OVERFULL_PT = 3.0


class NoLatex(RuntimeError):
    """latexmk is not installed (the message is the command that installs it)."""


@dataclass
class Built:
    pdf: Path
    pages: int
    undefined: list[str] = field(default_factory=list)
    overfull: list[str] = field(default_factory=list)


def read_log(log: str) -> tuple[int, list[str], list[str]]:
    """(pages, undefined references and citations, overfull boxes over OVERFULL_PT) from the
    .log of the last LaTeX pass."""
    m = re.search(r"Output written on \S+ \((\d+) pages?", log)
    pages = int(m.group(1)) if m else 0
    undefined = sorted(set(re.findall(r"(?:Reference|Citation) `([^']+)' on page \d+ undefined",
                                      log)))
    if "There were undefined references" in log and not undefined:
        undefined = ["(some reference)"]
    overfull = [f"{m.group(1)}pt at lines {m.group(2)}" for m in re.finditer(
        r"Overfull \\hbox \(([\d.]+)pt too wide\) [^\n]*?lines? ([\d-]+)", log)
        if float(m.group(1)) > OVERFULL_PT]
    return pages, undefined, overfull


def pdf(paper: Path = PAPER) -> Built:
    """Run latexmk in paper/ (output in paper/build/, its chatter in paper/build.log)."""
    if shutil.which("latexmk") is None:
        raise NoLatex(f"latexmk is missing; run: {INSTALL} (or make latex as root)")
    out = paper / "build"
    with open(paper / "build.log", "w", encoding="utf-8") as chatter:
        done = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
                               f"-outdir={out.name}", f"-jobname={JOB}", "main.tex"],
                              cwd=paper, stdout=chatter, stderr=subprocess.STDOUT)
    log_file = out / f"{JOB}.log"
    log = log_file.read_text(encoding="utf-8", errors="replace") if log_file.is_file() else ""
    if done.returncode != 0:
        first = next((ln for ln in log.splitlines() if ln.startswith("!")), "see paper/build.log")
        raise RuntimeError(f"latexmk failed ({first}); the whole log: {log_file}")
    pages, undefined, overfull = read_log(log)
    return Built(out / f"{JOB}.pdf", pages, undefined, overfull)
