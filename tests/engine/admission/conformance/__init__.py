"""Runs the conformance cases of engine/admission/conformance/ under pytest."""
