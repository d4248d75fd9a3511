def check(candidate):
    assert candidate('') == []
