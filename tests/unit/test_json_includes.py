"""`jsontext.includes`: what `match.outputs[].json` and the call assertions' `args` mean by "has"."""

from __future__ import annotations

from typing import Any

import pytest

from ptc_emulator.emulator.jsontext import includes


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ({"sku": "a", "units": 3}, {"sku": "a"}),
        ({"item": {"sku": "a", "units": 3}, "n": 1}, {"item": {"sku": "a"}}),
        ([{"sku": "a", "units": 1}, {"sku": "b"}], [{"sku": "a"}, {"sku": "b"}]),
        ({"units": 3}, {}),
        (3, 3.0),
        (None, None),
        (True, True),
    ],
)
def test_has(actual: Any, expected: Any) -> None:
    assert includes(actual, expected)


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ({"sku": "a"}, {"sku": "b"}),
        ({"sku": "a"}, {"units": None}),  # a missing key is not a null one
        ({"item": "a"}, {"item": {"sku": "a"}}),
        ([{"sku": "a"}, {"sku": "b"}], [{"sku": "a"}]),  # an array is compared whole
        ("3", 3),
        (1, True),  # JSON's true is not 1
        (False, 0),
        ([1], {"0": 1}),
    ],
)
def test_has_not(actual: Any, expected: Any) -> None:
    assert not includes(actual, expected)
