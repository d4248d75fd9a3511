"""The paper (main.tex, sections/) and its generator: `python -m paper` reads results/ and writes
paper/generated/ (one LaTeX macro per result number, every table, the notebooks' figures) and the
generated blocks of README.md and docs/. Why a package above experiments: the paper reads what
every study wrote and nothing reads the paper.
"""
