def check(candidate):
    assert candidate('111000', '101010') == '010010'
