"""Flatten: the layer helper, values, gradient, and the axes it merges."""

from __future__ import annotations

import numpy as np
from layer_helper import axis, check_layer_gradients, random_input, run_float64, run_layer_test

import ngraph_core as ng
from neon.layers import Affine, Flatten


def test_run_layer_test_image_and_vector() -> None:
    run_layer_test(lambda: Flatten(), [axis("C", 2), axis("H", 3), axis("W", 4), axis("N", 5)], (24, 5))
    run_layer_test(lambda: Flatten(), [axis("F", 7), axis("N", 5)], (7, 5))


def test_values_are_row_major_and_axis_named_by_joining() -> None:
    x = ng.placeholder([axis("C", 2), axis("H", 3), axis("W", 2), axis("N", 4)])
    out = Flatten()(x)
    assert out.axes.names == ("C_H_W", "N")
    value = random_input(x.axes)
    (y,) = run_float64([out], x, value)
    np.testing.assert_array_equal(y, value.reshape(12, 4))


def test_gradient_and_feeding_an_affine() -> None:
    check_layer_gradients(lambda: Flatten(), [axis("C", 2), axis("H", 2), axis("N", 3)])
    x = ng.placeholder([axis("C", 2), axis("H", 3), axis("N", 4)])
    assert Affine(5)(Flatten()(x)).axes.lengths == (5, 4)
