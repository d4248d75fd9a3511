"""The figures of docs/transition.md and the notebook, read from result files of both coders: the
search coder at a tiny scale and the model's stored smoke replies, replayed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.transition import report
from tests.support.paths import REPO


@pytest.fixture
def both(transition_results) -> Path:
    """Result files of both coders: the search coder at a tiny scale and the model's stored
    smoke replies replayed, the notebook executed on them (tests/experiments/conftest.py; read
    only)."""
    return transition_results


def test_the_block_puts_each_coders_figures_next_to_the_papers(both):
    text = report.block(both)
    search = json.loads((both / "transition" / "summary.json").read_text())
    model = json.loads((both / "transition-llm" / "summary.json").read_text())
    row = next(ln for ln in text.splitlines() if ln.startswith("| current correct by revision"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == report.PAPER["current"]
    assert cells[2] == ", ".join(f"{x:.3f}" for x in search["current_correct"])
    assert cells[3] == ", ".join(f"{x:.3f}" for x in model["current_correct"])
    assert "Qwen2.5 Coder 1.5B Instruct GGUF" in text and "not run" not in text
    assert "model calls" in text  # the manifest's figures
    validity = next(ln for ln in text.splitlines() if ln.startswith("| reply validity"))
    assert f"{model['validity']['all']['valid_share']:.3f} valid" in validity


def test_write_replaces_only_the_block(both, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{report.BEGIN}\nold numbers\n{report.END}\nafter\n")
    assert report.main(["--results", str(both), "--write", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "old numbers" not in text
    assert report.main(["--results", str(both), "--write", str(doc)]) == 0
    assert doc.read_text() == text  # idempotent
    doc.write_text("no markers\n")
    assert report.main(["--results", str(both), "--write", str(doc)]) == 2
    assert doc.read_text() == "no markers\n"


def test_missing_results_say_not_run(tmp_path):
    assert "not run" in report.block(tmp_path)


def test_the_docs_carry_the_block():
    doc = (REPO / "docs" / "transition.md").read_text()
    assert report.replace(doc, "X").count("X") >= 1  # both markers present, in order


def test_the_notebook_draws_both_coders_side_by_side(both):
    for folder in ("transition", "transition-llm"):
        png = both / folder / "transition.png"
        assert png.is_file() and png.stat().st_size > 10_000
    # the figure is the same for both folders: one drawing, both coders side by side
    assert (both / "transition" / "transition.png").read_bytes() == \
        (both / "transition-llm" / "transition.png").read_bytes()
    executed = json.loads((both / "notebooks" / "transition.ipynb").read_text())
    printed = "".join("".join(o.get("text", "")) for c in executed["cells"]
                      if c["cell_type"] == "code" for o in c.get("outputs", []))
    assert "offline search coder" in printed and "Qwen2.5 Coder 1.5B" in printed


def _reply(shown: str, content: str) -> str:
    from experiments.transition import chat, replies
    body = {"messages": chat.messages("def f(x):\n    '''task'''\n", shown, None)}
    return json.dumps(replies.entry("/v1/chat/completions", body, content, "stop", {}))


def test_patch_effects_tell_an_echo_from_a_docstring_edit_from_a_code_edit(tmp_path):
    """A model that rewrites the file but leaves its code as it was moves no rate of the
    experiment; the count must see the difference (and must not count what is not a patch)."""
    src = "def f(x):\n    '''Add one.'''\n    return x + 2\n"
    fence = "STATUS: DONE\n```python\n{}```"
    path = tmp_path / "replies.jsonl"
    path.write_text("\n".join([
        _reply(src, fence.format(src.replace("\n", "\n\n", 1))),             # blank line only
        _reply(src, fence.format(src.replace("Add one.", "Adds one."))),       # docstring
        _reply(src, fence.format(src.replace("x + 2", "x + 1"))),              # the repair
        _reply(src, fence.format("def f(x):\n    return x + 2\n")),            # docstring gone
        _reply(src, "KEEP"),                                                   # not a patch
        _reply(src, fence.format("def f(x:\n")),                               # does not parse
        _reply(src, fence.format("def f(x):\n    return x + 1\n")),            # a lone function
        '{"request_sha256": "torn',
    ]) + "\n")
    # the parse failure is an edit the typed boundary refused; the lone function is a repair
    assert report.patch_effects(path) == {"replies": 7, "patches": 5, "unchanged": 1,
                                          "docstrings_only": 2, "code": 2, "refused": 1,
                                          "share_code": 0.2857}
    assert report.patch_effects(tmp_path / "missing.jsonl") is None


def test_the_stored_smoke_replies_change_code(both):
    """The 1.5B model's stored smoke replies (the changed-functions prompt): most change code,
    none is refused; the block says so."""
    effects = report.patch_effects(both / "transition-llm" / "replies.jsonl")
    assert effects == {"replies": 7, "patches": 7, "unchanged": 2, "docstrings_only": 0,
                       "code": 5, "refused": 0, "share_code": 0.7143}
    assert "2 return the file unchanged, 0 change only docstrings, 5 change code" in \
        report.block(both)




def test_a_kept_paper_scale_run_gets_its_own_column(both, tmp_path):
    """The search coder at paper scale (results/transition-paper, kept beside the default run)
    is a column of its own between the default run and the model; without it the table is as
    before."""
    import shutil
    root = tmp_path / "r"
    shutil.copytree(both, root)
    s = json.loads((root / "transition" / "summary.json").read_text())
    s["scale"], s["current_correct"] = "paper", [0.111, 0.222]
    (root / "transition-paper").mkdir()
    (root / "transition-paper" / "summary.json").write_text(json.dumps(s))
    text = report.block(root)
    head = next(ln for ln in text.splitlines() if ln.startswith("| figure"))
    assert head.count("|") == 6 and "paper scale" in head
    row = next(ln for ln in text.splitlines() if ln.startswith("| current correct by revision"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "0.111, 0.222" and len(cells) == 5
    assert "scale `paper`" in text
    assert next(ln for ln in report.block(both).splitlines()
                if ln.startswith("| figure")).count("|") == 5
