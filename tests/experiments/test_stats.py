"""experiments/stats.py on hand-made counts: the Wilson interval the notebooks draw."""

from __future__ import annotations

from experiments.stats import wilson


def test_wilson_is_statsmodels_interval_to_the_digits_the_figures_print():
    """The closed form (no statsmodels import in a notebook's kernel) against statsmodels for
    every count of every n below 160, to the 6 digits and the text a result carries (-0.0 is
    not 0.0 there); statsmodels is asked once, with arrays."""
    from statsmodels.stats.proportion import proportion_confint

    pairs = [(k, n) for n in range(1, 160) for k in range(n + 1)]
    lows, highs = proportion_confint([k for k, _ in pairs], [n for _, n in pairs], alpha=0.05,
                                     method="wilson")
    for (k, n), lo, hi in zip(pairs, lows, highs, strict=True):
        assert repr(wilson(k, n)) == repr([round(float(lo), 6), round(float(hi), 6)]), (k, n)
    assert wilson(0, 0) is None
