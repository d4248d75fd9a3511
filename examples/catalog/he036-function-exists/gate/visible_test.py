def check(candidate):
    assert candidate(50) == 0
