"""Admission of revisions: state-bound evidence, typed actions, the checkpoint, the broker."""
