def check(candidate):
    assert candidate(10) == 55
