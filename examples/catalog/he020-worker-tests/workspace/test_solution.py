from solution import find_closest_elements as candidate


def test_0():
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2]) == (3.9, 4.0)


def test_1():
    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0]) == (5.0, 5.9)


def test_2():
    assert candidate([1.0, 2.0, 3.0, 4.0, 5.0, 2.2]) == (2.0, 2.2)
