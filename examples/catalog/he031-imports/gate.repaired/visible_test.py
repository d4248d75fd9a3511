def check(candidate):
    assert candidate(6) == False
