def check(candidate):
    assert candidate("5 apples and 6 oranges",19) == 8
