def check(candidate):
    assert candidate([]) == False
