def check(candidate):
    assert candidate([-1, -2, 4, 5, 6]) == [4, 5, 6]
