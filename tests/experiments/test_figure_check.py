"""experiments/figure_check.py: a figure whose title is drawn over its panels' titles is refused
before it is saved (the paper's Figure 2 was one: the transition figure's title over its top
panels' two-line titles, laid out by tight_layout); the same figure laid out constrained passes;
`save`, what the notebooks call, checks before it writes and writes what savefig writes."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.figure_check import check, overlaps, save


@pytest.fixture(scope="module")
def plt() -> Any:
    """matplotlib.pyplot on the Agg backend, imported by these tests only (its import is ~1
    CPU-s, which every xdist worker would pay at collection)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def transition_like(plt: Any, layout: str | None):
    """The transition figure's shape: two coders, two rows of two panels each, two-line panel
    titles, one figure title."""
    fig, grid = plt.subplots(4, 2, figsize=(15, 21), squeeze=False, layout=layout)
    for row in grid:
        for ax in row:
            ax.set_title("correct now vs ever (180 trajectories)\noffline search coder (search, "
                         "scale default, seed 0)", fontsize=9)
    fig.suptitle("transition: offline search coder (search, scale default, seed 0); Qwen2.5 "
                 "Coder 1.5B Instruct GGUF (llm-1.5b, scale llm, seed 0)", fontsize=11)
    if layout is None:
        fig.tight_layout()
    return fig


def test_the_figure_title_over_the_top_panels_is_refused(plt: Any) -> None:
    fig = transition_like(plt, None)  # how notebooks/transition.ipynb laid it out before
    found = overlaps(fig)
    assert "the figure's title is drawn over panel 1's title 'correct now vs ever (180 " \
           "trajectories)'" in found and len(found) == 2, found  # the two top panels
    with pytest.raises(ValueError, match="constrained"):
        check(fig)
    plt.close(fig)


def test_the_same_figure_laid_out_constrained_passes(plt: Any) -> None:
    fig = transition_like(plt, "constrained")
    assert overlaps(fig) == []
    check(fig)
    plt.close(fig)


def test_two_panel_titles_drawn_over_each_other_are_found_too(plt: Any) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(4, 3))
    a.set_title("a title far too long for its narrow panel, running into the next one")
    b.set_title("the next one")
    assert overlaps(fig) == ["panel 1's title 'a title far too long for its narrow panel, "
                             "running into the next one' is drawn over panel 2's title 'the "
                             "next one'"]
    plt.close(fig)


def _two_panels(plt: Any, first_title: str):
    fig, (a, b) = plt.subplots(1, 2, figsize=(4, 3))
    a.set_title(first_title)
    b.set_title("the next one")
    a.plot([0, 1], [1, 0])
    return fig


def test_save_checks_before_it_writes_and_writes_what_savefig_writes(plt: Any, tmp_path) -> None:
    """A save that skipped the check would write the refused figure; one that drew it otherwise
    than savefig would change the study's PNG (make reproduce compares them byte for byte)."""
    bad = _two_panels(plt, "a title far too long for its narrow panel, running into the next one")
    with pytest.raises(ValueError, match="drawn over"):
        save(bad, tmp_path / "bad.png", dpi=50)
    assert not (tmp_path / "bad.png").exists()
    plt.close(bad)
    ref = _two_panels(plt, "short")
    check(ref)
    ref.savefig(tmp_path / "ref.png", dpi=50)
    plt.close(ref)
    fig = _two_panels(plt, "short")
    png = save(fig, tmp_path / "a.png", tmp_path / "b.png", dpi=50)
    assert png == (tmp_path / "ref.png").read_bytes() == (tmp_path / "a.png").read_bytes() \
        == (tmp_path / "b.png").read_bytes()
    assert not plt.fignum_exists(fig.number)  # closed: the inline backend draws it no more
