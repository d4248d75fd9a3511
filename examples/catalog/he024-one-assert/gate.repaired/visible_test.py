def check(candidate):
    assert candidate(3) == 1
