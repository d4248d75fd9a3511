def check(candidate):
    assert candidate([2.0, 49.9]) == [0.0, 1.0]
