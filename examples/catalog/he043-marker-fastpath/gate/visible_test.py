def check(candidate):
    assert candidate([1, 3, 5, 0]) == False
