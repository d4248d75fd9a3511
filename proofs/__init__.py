"""Z3 encodings of `model/` and the proof obligations of docs/design.md; `python -m proofs` runs them."""
