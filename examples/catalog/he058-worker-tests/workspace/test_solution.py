from solution import common as candidate


def test_0():
    assert candidate([1, 4, 3, 34, 653, 2, 5], [5, 7, 1, 5, 9, 653, 121]) == [1, 5, 653]


def test_1():
    assert candidate([5, 3, 2, 8], [3, 2]) == [2, 3]


def test_2():
    assert candidate([4, 3, 2, 8], [3, 2, 4]) == [2, 3, 4]
