"""The runs of the reproducing machine: the examples `make reproduce` runs and every figure of
the benchmarks (timings of that machine, not claims).
"""

from __future__ import annotations

from paper.tables.table import Lit, Table, keys
from paper.tree import Results


def examples(r: Results) -> Table:
    """The examples `make reproduce` runs (results/examples/<name>.json, each run's report)."""
    names = sorted(p.stem for p in (r.root / "examples").glob("*.json")
                   if r.has(f"examples/{p.stem}/outcome"))
    t = Table("examples", ["example", "outcome", "attempts", "W", "spend", "B", "W_c"],
              needs=f"examples/{names[0]}/outcome" if names else "examples/pipeline/outcome")
    for name in names:
        k = f"examples/{name}"
        t.rows.append([Lit(name), f"{{{k}/outcome}}", f"{{{k}/attempts_total}}", f"{{{k}/W}}",
                       f"{{{k}/spend/settled|f2}}", f"{{{k}/spend/budget|f2}}", f"{{{k}/W_c|f2}}"])
    return t


def bench(r: Results) -> Table:
    """Every scalar figure of bench.json: timings of the reproducing machine, not claims."""
    t = Table("bench", ["benchmark", "figure", "value"], needs="bench/bench", long=True,
              widths=[r">{\raggedright\arraybackslash}p{0.3\linewidth}", r">{\raggedright\arraybackslash}p{0.4\linewidth}", "r"])
    for name in keys(r, "bench/bench"):
        for fig in keys(r, f"bench/bench/{name}"):
            k = f"bench/bench/{name}/{fig}"
            v = r.get(k)
            if isinstance(v, bool | int | float) and "{" not in fig and "}" not in fig:
                t.rows.append([Lit(name), Lit(fig), f"{{{k}}}"])
    return t
