"""Z3 encodings of `model/` and the proof obligations of docs/design.md; `python -m loopproof.proofs` runs them."""

if __name__ != "loopproof.proofs":  # the checkout's folder imported by its short name: a second copy
    raise ImportError(f"{__name__}: import loopproof.proofs (the installed name), not proofs; "
                      "fix: `python -m loopproof.proofs...` or `from loopproof.proofs import ...`")
