"""Z3 encodings of `model/` and the proof obligations of DESIGN.md; `python -m proofs` runs them."""
