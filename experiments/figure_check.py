"""What every study's figure is held to before it is saved: no title drawn over another.

Why a check and not a look: the paper's Figure 2 (the transition study's, page 15 of 30) printed
the figure's title over the titles of its top panels (`tight_layout` left no room for a title
above two-line panel titles), and nothing failed. Each notebook saves its figure with
`save(fig, path, dpi=...)`, which checks it first, so `make figures`, `make reproduce` and the
notebook tests stop on such a figure.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def _titles(fig: Any) -> list[tuple[str, Any]]:
    """The figure's title and every panel's titles, as (what it is, the text artist)."""
    out = []
    suptitle = getattr(fig, "_suptitle", None)  # matplotlib keeps it apart from fig.texts
    if suptitle is not None and suptitle.get_text():
        out.append(("the figure's title", suptitle))
    for i, ax in enumerate(fig.axes, 1):
        for attr in ("title", "_left_title", "_right_title"):
            text = getattr(ax, attr, None)
            if text is not None and text.get_text():
                first = text.get_text().splitlines()[0]
                out.append((f"panel {i}'s title {first!r}", text))
    return out


def overlaps(fig: Any) -> list[str]:
    """Each pair of titles whose drawn boxes overlap, in words (none: []). The figure is laid
    out and measured as a draw would, without painting its pixels (a third of a notebook's
    drawing time went to a draw whose picture nobody saw)."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    boxes = [(name, text.get_window_extent(renderer)) for name, text in _titles(fig)]
    return [f"{a} is drawn over {b}" for i, (a, box) in enumerate(boxes)
            for b, other in boxes[i + 1:] if box.overlaps(other)]


def check(fig: Any) -> None:
    """Raise ValueError naming the titles drawn over each other (fix: lay the figure out with
    `layout="constrained"`, which keeps room for the figure's title). The layout checked is then
    kept, so every save draws what was checked (a constrained layout solved again at each save
    moves a little: two saves of one figure differed in their bytes)."""
    found = overlaps(fig)
    if found:
        raise ValueError("; ".join(found) + "; fix: lay the figure out with "
                         "layout=\"constrained\" instead of tight_layout()")
    fig.set_layout_engine("none")


def save(fig: Any, *paths: Path, dpi: int) -> bytes:
    """`check(fig)`, then the figure drawn once as PNG and those bytes written to each path (the
    same bytes `fig.savefig(path, dpi=dpi)` writes); the figure is closed and the bytes returned
    for the notebook to show (`display(Image(...))`). Why not let the inline backend show it: it
    drew the figure twice more (once to crop it), a third of a notebook's time, to show a
    picture that was not the one saved."""
    import matplotlib.pyplot as plt

    check(fig)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=dpi)
    for path in paths:
        Path(path).write_bytes(png.getvalue())
    plt.close(fig)
    return png.getvalue()
