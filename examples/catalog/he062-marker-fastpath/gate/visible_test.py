def check(candidate):
    assert candidate([3, 1, 2, 4, 5]) == [1, 4, 12, 20]
