def check(candidate):
    assert candidate([], 'john') == []
