from solution import triples_sum_to_zero as candidate


def test_0():
    assert candidate([1, 3, 5, 0]) == False


def test_1():
    assert candidate([1, 3, 5, -1]) == False


def test_2():
    assert candidate([1, 3, -2, 1]) == True
