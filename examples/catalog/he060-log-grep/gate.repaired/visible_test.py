def check(candidate):
    assert candidate(1) == 1
