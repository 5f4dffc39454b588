"""Pool and GlobalAvgPool: the layer helper, finite differences, PyTorch, errors."""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import (
    axis,
    check_layer_gradients,
    feature_major,
    random_input,
    random_weights,
    run_layer_test,
    torch_tensor,
)

import ngraph_core as ng
from neon.layers import GlobalAvgPool, LayerError, Pool


def image(c: int = 2, *spatial: int, n: int = 2) -> list[ng.Axis]:
    names = ("D", "H", "W")[3 - len(spatial):]
    return [axis("C", c), *(axis(name, length) for name, length in zip(names, spatial)), axis("N", n)]


@pytest.mark.parametrize("factory, input_axes, out_lengths", [
    (lambda: Pool(2), image(3, 8, 6), (3, 4, 3, 2)),
    (lambda: Pool((3, 3), op="avg", strides=2, padding=1), image(2, 7, 8), (2, 4, 4, 2)),
    (lambda: Pool(3, strides=2, ceil_mode=True), image(2, 8, 8), (2, 4, 4, 2)),
    (lambda: Pool((2, 3), op="avg", strides=(2, 1), padding=(1, 0)), image(2, 5, 5), (2, 3, 3, 2)),
    (lambda: Pool(2), image(2, 9), (2, 4, 2)),
    (lambda: Pool(2, op="avg"), image(2, 4, 4, 4), (2, 2, 2, 2, 2)),
    (lambda: GlobalAvgPool(), image(3, 4, 5), (3, 2)),
    (lambda: GlobalAvgPool(), image(3, 2, 3, 2), (3, 2)),
], ids=["max2", "avg-stride-pad", "max-ceil", "avg-rect", "max-1d", "avg-3d", "global", "global-3d"])
def test_run_layer_test(factory, input_axes, out_lengths) -> None:
    result = run_layer_test(factory, input_axes, out_lengths)
    assert result.layer.variables == []
    assert result.out.axes.names[0] == "C" and result.out.axes[-1].is_batch


@pytest.mark.parametrize("factory, input_axes", [
    (lambda: Pool(2), image(2, 4, 5)),
    (lambda: Pool(3, strides=2, padding=1, ceil_mode=True), image(2, 6, 5)),
    (lambda: Pool((3, 2), op="avg", strides=(2, 1), padding=(1, 0), ceil_mode=True), image(2, 6, 5)),
    (lambda: Pool(2, op="avg"), image(2, 5)),
    (lambda: GlobalAvgPool(), image(3, 3, 4)),
], ids=["max", "max-pad-ceil", "avg-pad-ceil", "avg-1d", "global"])
def test_gradients_match_finite_differences(factory, input_axes) -> None:
    check_layer_gradients(factory, input_axes)


def _run(layer, x_axes, x_value):
    x = ng.placeholder(x_axes)
    out = layer(x)
    R = random_weights(out.axes)
    (grad,) = ng.gradients(ng.sum(out * ng.constant(R, out.axes)), [x])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        y, gx = t.computation([out, grad], x)(x_value)
    return y, gx, R


@pytest.mark.parametrize("spatial, fshape, op, strides, padding, ceil_mode", [
    ((8, 8), 2, "max", None, 0, False),
    ((7, 9), 3, "max", 2, 1, False),
    ((7, 8), 3, "max", 2, 1, True),
    ((6, 7), (2, 3), "max", (2, 1), (1, 1), True),
    ((8, 8), 2, "avg", None, 0, False),
    ((7, 9), 3, "avg", 2, 1, False),
    ((7, 8), 3, "avg", 2, 1, True),
    ((5, 6), (3, 2), "avg", (2, 2), (1, 0), True),
    ((9,), 3, "max", 2, 1, True),
    ((9,), 2, "avg", 3, 1, False),
    ((4, 5, 6), 2, "max", None, 0, True),
    ((5, 4, 6), 3, "avg", 2, 1, False),
], ids=["max2", "max3s2p1", "max-ceil", "max-rect-ceil", "avg2", "avg3s2p1", "avg-ceil", "avg-rect-ceil", "max-1d",
        "avg-1d", "max-3d-ceil", "avg-3d"])
def test_pool_matches_torch(spatial, fshape, op, strides, padding, ceil_mode) -> None:
    torch = pytest.importorskip("torch")
    rank = len(spatial)
    x_axes = image(3, *spatial, n=2)
    x_value = random_input(x_axes)
    y, gx, R = _run(Pool(fshape, op, strides, padding, ceil_mode), x_axes, x_value)
    kind = {"max": "MaxPool", "avg": "AvgPool"}[op]
    module = getattr(torch.nn, f"{kind}{rank}d")(fshape, strides, padding, ceil_mode=ceil_mode)
    xt = torch_tensor(x_value, requires_grad=True)
    yt = module(xt)
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("spatial", [(5,), (4, 6), (3, 4, 2)], ids=["1d", "2d", "3d"])
def test_global_avg_pool_matches_torch_adaptive_avg_pool(spatial) -> None:
    torch = pytest.importorskip("torch")
    x_axes = image(4, *spatial, n=3)
    x_value = random_input(x_axes)
    y, gx, R = _run(GlobalAvgPool(), x_axes, x_value)
    module = getattr(torch.nn, f"AdaptiveAvgPool{len(spatial)}d")(1)
    xt = torch_tensor(x_value, requires_grad=True)
    yt = module(xt).flatten(1)  # (N, C)
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-12)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-12)


def test_pool_keeps_the_axis_names_and_order() -> None:
    x = ng.placeholder([axis("K", 4), axis("H", 8), axis("W", 6), axis("N", 2)])
    assert Pool(2)(x).axes.names == ("K", "H", "W", "N")
    assert GlobalAvgPool()(x).axes.names == ("K", "N")


@pytest.mark.parametrize("make, words", [
    (lambda: Pool(0), ["fshape", "received: 0"]),
    (lambda: Pool((2, 2), op="min"), ["op", "'max', 'avg'", "'min'"]),
    (lambda: Pool((2, 2), strides=(1, 1, 1)), ["strides", "2 ints"]),
    (lambda: Pool(2, padding="same"), ["padding", "the same on both sides"]),
    (lambda: Pool(3, padding=[(1, 0), (1, 0)]), ["padding", "the same on both sides"]),
    (lambda: Pool(2, ceil_mode=1), ["ceil_mode", "bool"]),
])
def test_bad_configs_raise_layer_error(make, words) -> None:
    with pytest.raises(LayerError) as info:
        make()
    for word in (*words, "expected", "hint"):
        assert word in str(info.value)


@pytest.mark.parametrize("make, x_axes, pattern", [
    (lambda: Pool(2, name="p"), [axis("F", 8), axis("N", 2)],
     r"p \(Pool\): expected an image \[C, H, W, N\]: a batch axis N, a channel axis and 1 to 3 spatial axes.*"
     r"received: \[F:8, N:2\].*hint"),
    (lambda: Pool((2, 2)), image(2, 8), r"expected an image \[C, H, W, N\].*2 spatial axes.*received: \[C:2, W:8"),
    (lambda: Pool(2), [axis("C", 2), axis("H", 4), axis("W", 4)], r"hint: name the batch axis 'N'"),
    (lambda: Pool(5), image(2, 3, 3), r"Pool_\d+ \(Pool\): pool: the window 5 .* larger than the padded input.*hint"),
    (lambda: Pool(2, padding=2), image(2, 6, 6), r"expected padding between 0 and half the window"),
    (lambda: GlobalAvgPool(name="g"), [axis("F", 8), axis("N", 2)], r"g \(GlobalAvgPool\): expected an image"),
])
def test_bad_inputs_raise_layer_error(make, x_axes, pattern) -> None:
    with pytest.raises(LayerError, match=pattern):
        make()(ng.placeholder(x_axes))
