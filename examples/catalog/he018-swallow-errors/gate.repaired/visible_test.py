def check(candidate):
    assert candidate('', 'x') == 0
