def check(candidate):
    assert candidate('(()()) ((())) () ((())()())') == [2, 3, 1, 3]
