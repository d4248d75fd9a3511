"""Benchmarks: ratios against baselines run side by side. Not part of the installed engine."""
