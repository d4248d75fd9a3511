def check(candidate):
    assert candidate(5, 3) == 7.5
