def check(candidate):
    assert candidate(2) == 1
