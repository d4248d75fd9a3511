"""The reference harness: runs real workers and gates under the model's rules, adding only I/O."""

if __name__ != "loopproof.engine":  # the checkout's folder imported by its short name: a second copy
    raise ImportError(f"{__name__}: import loopproof.engine (the installed name), not engine; "
                      "fix: `python -m loopproof.engine...` or `from loopproof.engine import ...`")
