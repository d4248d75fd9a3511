def check(candidate):
    assert candidate('') == True
