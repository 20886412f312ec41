import pytest

import calc


def test_add():
    assert calc.add(2, 3) == 5


def test_subtract():
    assert calc.subtract(7, 4) == 3
    assert calc.subtract(4, 7) == -3


def test_mean():
    assert calc.mean([1, 2, 3, 4]) == 2.5
    with pytest.raises(ValueError):
        calc.mean([])
