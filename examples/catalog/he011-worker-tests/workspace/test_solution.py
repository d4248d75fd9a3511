from solution import string_xor as candidate


def test_0():
    assert candidate('111000', '101010') == '010010'


def test_1():
    assert candidate('1', '1') == '0'


def test_2():
    assert candidate('0101', '0000') == '0101'
