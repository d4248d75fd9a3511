def check(candidate):
    assert candidate(0) == '0'
