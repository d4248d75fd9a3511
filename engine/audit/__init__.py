"""The gate instrument: does a gate reject what it is meant to reject?

A catalogue of loops (catalogue.py) is turned into mutants (operators/, mutants.py), each mutant is
judged by the loop's gate on a scratch copy (judge.py), and the verdicts are classified per gate:
vacuous, self-attesting, and a false-accept rate per tier with its Wilson bound (report.py).
"""
