def check(candidate):
    assert candidate(100, 2) == "001"
