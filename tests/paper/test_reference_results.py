"""reference-results/ is the committed copy the paper and the docs build from: on a fresh clone
`python -m paper` needs nothing else, the tracked docs pages equal what the copy gives, no
command rewrites a tracked page from a results folder without the figures, and the comparison
`make reproduce` prints catches a changed byte but not a timing.

Planted faults (each seen failing): a flipped digit in a copied summary (reported as differing,
with its key); `python -m paper` over an empty results folder (it wrote docs/results.md with
"not run" everywhere: now exit 2 and nothing written); latexmk failing (it ended in
KeyError: 'pages')."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from experiments.transition import report as transition_report
from paper import cli, docs, reference
from tests.support.paths import REPO as ROOT

REF = ROOT / reference.FOLDER


def test_the_copy_is_committed_complete_and_small() -> None:
    assert reference.missing(REF) == []
    held = reference.files(REF)
    assert {"transition-llm/summary.json", "transition-llm/replies.jsonl"} <= set(held)
    assert sum((REF / f).stat().st_size for f in held) < 4_000_000  # summaries, not bulk rows
    assert not any(f.endswith(".csv") for f in held)
    ignored = (ROOT / ".gitignore").read_text().split()
    assert f"{reference.FOLDER}/" not in ignored and reference.FOLDER not in ignored
    for study in ("bounds", "crash", "integrity", "mutants", "transition", "growth"):
        s = json.loads((REF / study / "summary.json").read_text())
        assert s["scale"] == "default" and s["seed"] == 0, study


def test_the_tracked_docs_pages_are_what_the_copy_gives(tmp_path: Path) -> None:
    """docs/results.md and docs/transition.md's figures block, regenerated from the copy into a
    scratch tree, equal the committed pages (so no figure in them is stale or typed)."""
    files = cli.generate(REF, tmp_path / "generated")
    assert (ROOT / docs.PATH).read_text(encoding="utf-8") == files["docs-results.md"]
    page = (ROOT / "docs" / "transition.md").read_text(encoding="utf-8")
    assert transition_report.replace(page, transition_report.block(REF)) == page


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    for rel in reference.files(REF):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REF / rel, dst / rel)
    return dst


def test_a_rerun_is_compared_byte_for_byte_and_timings_are_kept_out(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    same = reference.compare(run, REF)
    assert same["differ"] == {} and len(same["identical"]) >= len(reference.REQUIRED)
    # a timing differs on every run: kept out, and said so
    proofs = json.loads((run / "proofs" / "proofs.json").read_text())
    proofs[0]["seconds"] += 1.5
    (run / "proofs" / "proofs.json").write_text(json.dumps(proofs, indent=2) + "\n")
    timing = run / "mutants" / "timing.json"
    timing.write_text(timing.read_text().replace("1", "2"))
    out = reference.compare(run, REF)
    assert out["differ"] == {}
    assert "proofs/proofs.json" in out["identical"] and "seconds" in out["kept_out"][
        "proofs/proofs.json"]
    assert "mutants/timing.json" in out["kept_out"]
    # a result that changed is named, with the key where it changed
    crash = run / "crash" / "summary.json"
    s = json.loads(crash.read_text())
    s["outcome_recovered"] -= 1
    crash.write_text(json.dumps(s, indent=2, sort_keys=True) + "\n")
    out = reference.compare(run, REF)
    assert list(out["differ"]) == ["crash/summary.json"]
    assert out["differ"]["crash/summary.json"].startswith("/outcome_recovered")
    assert reference.main(["--compare", str(run), "--copy", str(REF)]) == 1


def test_update_replaces_only_the_studies_the_run_made(tmp_path: Path) -> None:
    copy = _copy(tmp_path / "c")
    run = tmp_path / "fresh"
    shutil.copytree(REF / "crash", run / "crash")
    s = json.loads((run / "crash" / "summary.json").read_text())
    s["cases"] += 1
    (run / "crash" / "summary.json").write_text(json.dumps(s))
    assert reference.main(["--update", str(run), "--copy", str(copy)]) == 0
    assert json.loads((copy / "crash" / "summary.json").read_text())["cases"] == s["cases"]
    assert (copy / "transition-llm" / "replies.jsonl").is_file()  # not in the run: kept
    assert reference.main(["--update", str(tmp_path / "nothing"), "--copy", str(copy)]) == 2
    (tmp_path / "empty").mkdir()
    assert reference.main(["--update", str(tmp_path / "empty"), "--copy", str(copy)]) == 2


def test_a_run_of_paper_scale_studies_alone_updates_the_copy(tmp_path: Path) -> None:
    """make reproduce-paper's results/ holds only <study>-paper/ folders and none of the
    default-scale files: the copy takes them and keeps the rest."""
    copy = _copy(tmp_path / "c")
    run = tmp_path / "paper-run"
    shutil.copytree(REF / "crash", run / "crash-paper")
    assert reference.main(["--update", str(run), "--copy", str(copy)]) == 0
    assert (copy / "crash-paper" / "summary.json").read_bytes() == \
        (REF / "crash" / "summary.json").read_bytes()
    assert (copy / "crash" / "summary.json").is_file()


def test_no_command_rewrites_a_tracked_page_from_results_without_figures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    page = root / "docs" / "results.md"
    page.write_text("the figures\n")
    (root / "docs" / "transition.md").write_text("prose\n")
    empty = tmp_path / "results"
    empty.mkdir()
    code = cli.main(["--results", str(empty), "--out", str(tmp_path / "g"), "--root", str(root)])
    err = capsys.readouterr().err
    assert code == 2 and page.read_text() == "the figures\n"
    assert err.count("\n") == 1 and "nothing written" in err and "crash/summary.json" in err
    assert not (tmp_path / "g").exists()
    assert transition_report.main(["--results", str(empty), "--write",
                                   str(root / "docs" / "transition.md")]) == 2
    assert (root / "docs" / "transition.md").read_text() == "prose\n"


def test_a_failed_latex_build_is_one_line_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def fails() -> None:
        raise RuntimeError("latexmk failed (! Undefined control sequence.)")
    monkeypatch.setattr(cli.build, "pdf", fails)
    code = cli.main(["--results", str(REF), "--out", str(tmp_path / "g"), "--root",
                     str(tmp_path), "--pdf"])
    err = capsys.readouterr().err
    assert code == 1 and "latexmk failed" in err and "Traceback" not in err


def test_a_replay_keeps_the_model_runs_manifest_in_the_copy(tmp_path: Path) -> None:
    """make reproduce replays the copy's model run from its stored replies: the result files are
    refreshed, but the copy keeps the log of the run that made the replies (model time, tokens),
    not the replay's. Planted fault (seen failing): update() copying every file of the run."""
    copy = tmp_path / "copy"
    run = tmp_path / "run"
    for d, mode in ((copy, "model"), (run, "replay")):
        (d / "transition-llm").mkdir(parents=True)
        (d / "transition-llm" / "manifest.json").write_text(json.dumps({"mode": mode}))
        (d / "transition-llm" / "summary.json").write_text(json.dumps({"from": mode}))
    reference.update(run, copy)
    assert json.loads((copy / "transition-llm" / "manifest.json").read_text())["mode"] == "model"
    assert json.loads((copy / "transition-llm" / "summary.json").read_text())["from"] == "replay"
    # a new model run does replace the copy's log (make reproduce-llm: --timings)
    (run / "transition-llm" / "manifest.json").write_text(json.dumps({"mode": "model", "n": 2}))
    reference.update(run, copy)  # its figures did not move: the copy's files stay
    assert "n" not in json.loads((copy / "transition-llm" / "manifest.json").read_text())
    reference.update(run, copy, timings=True)
    assert json.loads((copy / "transition-llm" / "manifest.json").read_text())["n"] == 2


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _rerun(tmp_path: Path) -> Path:
    """What a rerun of every study at the copy's seed gives on another machine: the same
    figures, every timing and the machine's own bytes different."""
    run = _copy(tmp_path / "run")
    proofs = json.loads((run / "proofs" / "proofs.json").read_text())
    for row in proofs:
        row["seconds"] += 0.25  # the solver's time
    (run / "proofs" / "proofs.json").write_text(json.dumps(proofs, indent=2) + "\n")
    for timing in run.glob("*/timing*.json"):
        timing.write_text(timing.read_text().replace("1", "2"))
    for rel in reference.files(run):
        if rel.startswith("examples/"):  # wall-clock spend, and the head hash over it
            report = json.loads((run / rel).read_text())
            report["spend"]["settled"] = report["spend"].get("settled", 0) + 0.125
            report["head"] = "f" * 64
            (run / rel).write_text(json.dumps(report, sort_keys=True) + "\n")
        elif rel.startswith("bench/") or rel.endswith(".png"):
            (run / rel).write_bytes((run / rel).read_bytes() + b"\0")  # a timing, a redraw
    return run


def test_a_rerun_that_reproduces_every_figure_changes_no_byte_of_the_copy(
        tmp_path: Path) -> None:
    """make reproduce on a fresh clone once left 12 tracked files changed (solver seconds,
    wall-clock spend, the machine's ledger path): a study whose figures did not move keeps the
    copy's files as they are. Planted fault (seen failing): update() replacing every study the
    run made, as it did."""
    copy = _copy(tmp_path / "copy")
    before = _files(copy)
    run = _rerun(tmp_path)
    assert reference.compare(run, copy)["differ"] == {}
    assert reference.main(["--update", str(run), "--copy", str(copy)]) == 0
    assert _files(copy) == before
    # a moved figure refreshes its study, its timings with it, and nothing else
    crash = json.loads((run / "crash" / "summary.json").read_text())
    crash["outcome_recovered"] -= 1
    (run / "crash" / "summary.json").write_text(json.dumps(crash, indent=2, sort_keys=True))
    written = reference.update(run, copy)
    assert written and {rel.split("/", 1)[0] for rel in written} == {"crash"}
    now = _files(copy)
    assert {rel for rel in now if now[rel] != before.get(rel)} == {
        rel for rel in written if (run / rel).read_bytes() != before.get(rel)}
    assert now["crash/summary.json"] == (run / "crash" / "summary.json").read_bytes()
    # --timings refreshes every study of the run
    reference.update(run, copy, timings=True)
    assert _files(copy)["proofs/proofs.json"] == (run / "proofs" / "proofs.json").read_bytes()
