def check(candidate):
    assert candidate(15) == 5
