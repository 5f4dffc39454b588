"""Bad arguments to the API raise typed errors instead of giving silent wrong values or raw exceptions
(issue 18, item 8)."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng

C = ng.make_axis(3, name="C")


@pytest.mark.parametrize("length", [2.5, 2.0, "3", None, True])
def test_make_axis_wants_an_int_length(length) -> None:
    with pytest.raises(ng.AxesError, match="expected an int length"):
        ng.make_axis(length, name="H")


def test_make_axis_takes_numpy_ints() -> None:
    assert ng.make_axis(np.int64(4), name="H").length == 4


@pytest.mark.parametrize("paddings, match", [
    ([[0, -1]], "non-negative"),
    ([(0, 1, 2)], "pair of ints"),
    ([1.5], "pair of ints"),
    ([(0.5, 1)], "pair of ints"),
    ([1, 1], "expected 1 paddings"),
])
def test_pad_rejects_malformed_paddings(paddings, match) -> None:
    x = ng.placeholder([C])
    with pytest.raises(ng.AxesError, match=match):
        ng.pad(x, paddings)


@pytest.mark.parametrize("make", [ng.uniform, ng.normal])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_random_tensors_are_float(make, dtype) -> None:
    with pytest.raises(ng.DTypeError, match="expected a float dtype"):
        make([C], dtype=dtype)
