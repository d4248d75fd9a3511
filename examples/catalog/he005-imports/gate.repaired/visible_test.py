def check(candidate):
    assert candidate([], 7) == []
