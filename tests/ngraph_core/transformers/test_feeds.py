"""Feeding placeholders: wrong kinds of data and malformed placeholder lists give a typed FeedError
naming the placeholder (issue 18, item 9), while conversions that keep the kind still work."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng

C = ng.make_axis(3, name="C")


@pytest.mark.parametrize("value, received", [
    (np.ones(3, dtype=complex), "complex128"),
    (np.array([1, 2, "a"], dtype=object), "object"),
    (np.array(["1", "2", "3"]), "<U1"),
    (np.array([1, 2, 3], dtype="datetime64[D]"), "datetime64"),
])
def test_non_numeric_or_complex_feeds_are_refused(value: np.ndarray, received: str) -> None:
    x = ng.placeholder([C], name="images")
    with ng.transformers.make_transformer() as t:
        f = t.computation(x * 2.0, x)
        with pytest.raises(ng.FeedError, match=f"placeholder images: expected float32 data.*{received}"):
            f(value)


def test_float_data_into_an_int_placeholder_is_refused() -> None:
    labels = ng.placeholder([C], dtype="int32", name="labels")
    with ng.transformers.make_transformer() as t:
        f = t.computation(labels * 2, labels)
        with pytest.raises(ng.FeedError, match="placeholder labels: expected int32 data.*float64"):
            f(np.array([1.7, 2.2, 3.9]))
        np.testing.assert_array_equal(f(np.array([1, 2, 3], dtype=np.int64)), [2, 4, 6])  # int64 -> int32: same kind


@pytest.mark.parametrize("value", [np.arange(3, dtype=np.int64), np.array([True, False, True]), [1, 2, 3],
                                   np.arange(3, dtype=np.uint8), np.arange(3.0)])
def test_conversions_that_keep_the_kind_work(value) -> None:
    x = ng.placeholder([C], name="x")
    with ng.transformers.make_transformer() as t:
        np.testing.assert_allclose(t.computation(x * 2.0, x)(value), np.asarray(value, dtype=float) * 2.0)


def test_placeholders_listed_twice_or_not_placeholders_are_refused() -> None:
    x = ng.placeholder([C], name="x")
    with ng.transformers.make_transformer() as t:
        with pytest.raises(ng.FeedError, match="x listed more than once"):
            t.computation(x * 2.0, x, x)
        with pytest.raises(ng.FeedError, match="expected placeholders"):
            t.computation(x * 2.0, x * 3.0)


def test_wrong_count_and_shape_name_the_placeholder() -> None:
    x = ng.placeholder([C], name="x")
    with ng.transformers.make_transformer() as t:
        f = t.computation(x * 2.0, x)
        with pytest.raises(ng.FeedError, match="expected 1 input"):
            f(np.ones(3), np.ones(3))
        with pytest.raises(ng.FeedError, match="placeholder x: expected an array of shape \\(3,\\)"):
            f(np.ones(4))
