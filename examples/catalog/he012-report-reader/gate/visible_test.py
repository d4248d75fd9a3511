def check(candidate):
    assert candidate([]) == None
