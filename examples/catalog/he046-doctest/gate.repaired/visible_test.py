def check(candidate):
    assert candidate(5) == 4
