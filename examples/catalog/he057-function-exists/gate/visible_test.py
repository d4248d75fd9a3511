def check(candidate):
    assert candidate([1, 2, 4, 10]) == True
