"""The pinned policy and catalogue-bounded evolution: what a run may change about itself."""
