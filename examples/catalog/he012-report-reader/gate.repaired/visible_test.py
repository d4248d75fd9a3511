def check(candidate):
    assert candidate(['x', 'y', 'z']) == 'x'
