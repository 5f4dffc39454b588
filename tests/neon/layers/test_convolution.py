"""Conv, Deconv and their filter layers: the layer helper, finite differences, PyTorch, fans, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from layer_helper import (
    axis,
    check_layer_gradients,
    feature_major,
    random_input,
    random_weights,
    run_float64,
    run_layer_test,
    torch_tensor,
)

import ngraph_core as ng
from neon.initializers import Constant, GlorotUniform, Kaiming, Uniform, compute_fans
from neon.layers import Conv, Convolution, Deconv, Deconvolution, LayerError, training_mode


def image(c: int = 2, *spatial: int, n: int = 2) -> list[ng.Axis]:
    """``[C, *spatial, N]`` with spatial axes named D, H, W (the last ones of them)."""
    names = ("D", "H", "W")[3 - len(spatial):]
    return [axis("C", c), *(axis(name, length) for name, length in zip(names, spatial)), axis("N", n)]


# -- the layer helper, one line per configuration --------------------------------------------------

@pytest.mark.parametrize("factory, input_axes, out_lengths", [
    (lambda: Convolution((3, 3, 4)), image(2, 6, 5), (4, 4, 3, 2)),
    (lambda: Conv((3, 3, 4), padding=1, bias=0.1, activation="relu"), image(2, 6, 5), (4, 6, 5, 2)),
    (lambda: Conv((3, 3, 4), strides=2, padding=1, batch_norm=True, activation="tanh"), image(3, 7, 8), (4, 4, 4, 2)),
    (lambda: Conv((3, 3, 4), strides=2, padding="same"), image(2, 7, 8), (4, 4, 4, 2)),
    (lambda: Conv((3, 2, 3), strides=(1, 2), padding=[(1, 0), 2], dilation=(2, 1)), image(2, 6, 5), (3, 3, 4, 2)),
    (lambda: Conv((3, 3, 4), padding="same", groups=2, bias=0.0), image(4, 5, 5), (4, 5, 5, 2)),
    (lambda: Conv((3, 5), padding=1, bias=0.0), image(2, 7), (5, 7, 2)),
    (lambda: Conv((2, 3, 2, 3), padding=(0, 1, 0)), image(2, 3, 4, 3), (3, 2, 4, 2, 2)),
    (lambda: Deconvolution((3, 3, 2)), image(3, 4, 3), (2, 6, 5, 2)),
    (lambda: Deconv((4, 4, 3), strides=2, padding=1, bias=0.0, activation="relu"), image(2, 3, 4), (3, 6, 8, 2)),
    (lambda: Deconv((3, 3, 3), strides=2, padding=1, output_padding=1, batch_norm=True), image(2, 3, 3),
     (3, 6, 6, 2)),
    (lambda: Deconv((3, 2), strides=3, dilation=2), image(2, 3), (2, 11, 2)),
], ids=["convolution", "conv-bias-relu", "conv-stride-bn", "conv-same-stride", "conv-asymmetric", "conv-groups",
        "conv-1d", "conv-3d", "deconvolution", "deconv-stride", "deconv-output-padding-bn", "deconv-1d-dilation"])
def test_run_layer_test(factory, input_axes, out_lengths) -> None:
    run_layer_test(factory, input_axes, out_lengths)


def test_output_keeps_the_spatial_names_and_names_channels_after_the_layer() -> None:
    x = ng.placeholder(image(3, 8, 8))
    conv = Conv((3, 3, 5), strides=2, padding=1, name="c1")
    y = conv(x)
    assert y.axes.names == ("c1", "H", "W", "N") and y.axes[0] == conv.out_axis
    assert conv.filter.W.axes.names == ("C", "R", "S", "c1")
    assert [type(s).__name__ for s in Conv((3, 3, 2), bias=0.0, activation="relu", batch_norm=True).sublayers] == [
        "Convolution", "BatchNorm", "Bias", "Activation"]
    up = Deconv((2, 2, 4), strides=2, name="up")
    assert up(y).axes.names == ("up", "H", "W", "N") and up.filter.W.axes.names == ("up", "R", "S", "c1")


# -- gradients against finite differences (float64) ----------------------------------------------------

@pytest.mark.parametrize("factory, input_axes", [
    (lambda: Convolution((3, 3, 3), strides=2, padding=(1, 0), init=Uniform(-1, 1)), image(2, 5, 6)),
    (lambda: Convolution((2, 3, 4), dilation=(2, 1), padding="same", groups=2, init=Uniform(-1, 1)), image(2, 4, 5)),
    (lambda: Conv((3, 3), strides=2, padding=1, init=Uniform(-1, 1), bias=Uniform(-1, 1), activation="tanh"),
     image(2, 7)),
    (lambda: Conv((2, 2, 2), padding=1, init=Uniform(-1, 1), batch_norm=True, activation="logistic"),
     image(2, 3, 3, n=3)),
    (lambda: Deconvolution((3, 3, 2), strides=2, padding=1, output_padding=1, init=Uniform(-1, 1)), image(3, 3, 2)),
    (lambda: Deconv((2, 3), strides=3, dilation=2, init=Uniform(-1, 1), bias=Uniform(-1, 1)), image(2, 4)),
], ids=["conv-stride-pad", "conv-dilation-same-groups", "conv1d-bias-tanh", "conv-bn", "deconv-2d", "deconv-1d"])
def test_gradients_match_finite_differences(factory, input_axes) -> None:
    check_layer_gradients(factory, input_axes)


# -- against PyTorch, weights copied -----------------------------------------------------------------

def _run(layer, x_axes, x_value, wrt):
    """Output and gradients of ``sum(out * R)`` w.r.t. the input and ``wrt(layer)`` variables (float64)."""
    x = ng.placeholder(x_axes)
    with training_mode(True):
        out = layer(x)
    R = random_weights(out.axes)
    variables = wrt(layer)
    grads = ng.gradients(ng.sum(out * ng.constant(R, out.axes)), [x, *variables])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        values = [t.read_variable(v) for v in variables]
        results = t.computation([out, *grads], x)(x_value)
    return results, values, R


def _torch_filter(value: np.ndarray):
    """Our ``[Ci, *window, K]`` (or a deconvolution's ``[K, *window, C]``) as PyTorch's ``(last, first, *window)``."""
    import torch

    return torch.nn.Parameter(torch.tensor(np.moveaxis(value, -1, 0).copy(), dtype=torch.float64))


CONV_CASES = [  # (spatial lengths, C, fshape, strides, padding, dilation, groups)
    ((5, 5), 3, (3, 3, 4), 1, 1, 1, 1),
    ((7, 6), 2, (3, 3, 4), 2, 1, 1, 1),
    ((9, 8), 4, (3, 2, 6), (2, 1), (2, 0), (1, 2), 2),
    ((8, 8), 4, (3, 3, 4), 1, "same", 2, 4),
    ((6, 7), 2, (2, 4, 3), 1, "same", 1, 1),
    ((7, 7), 3, (5, 5, 2), 3, 2, 1, 1),
    ((9,), 2, (3, 4), 2, 1, 2, 1),
    ((4, 5, 4), 2, (3, 3, 2, 3), (1, 2, 1), (1, 1, 0), 1, 1),
]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("spatial, c, fshape, strides, padding, dilation, groups", CONV_CASES,
                         ids=["3x3", "stride2", "rect-dilated-groups", "same-dilated-depthwise", "same-even",
                              "5x5-stride3", "1d", "3d"])
def test_conv_matches_torch(spatial, c, fshape, strides, padding, dilation, groups) -> None:
    torch = pytest.importorskip("torch")
    rank = len(spatial)
    x_axes = image(c, *spatial, n=3)
    layer = Conv(fshape, strides, padding, dilation, init=Uniform(-1, 1), bias=Uniform(-1, 1), groups=groups)
    x_value = random_input(x_axes)
    (y, gx, gw, gb), (w, b), R = _run(layer, x_axes, x_value, lambda lyr: [lyr.filter.W, lyr.bias.b])

    module = getattr(torch.nn, f"Conv{rank}d")(c, fshape[-1], fshape[:-1], strides, padding, dilation, groups).double()
    module.weight, module.bias = _torch_filter(w), torch.nn.Parameter(torch.tensor(b))
    xt = torch_tensor(x_value, requires_grad=True)
    yt = module(xt)
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gw, np.moveaxis(module.weight.grad.numpy(), 0, -1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gb, module.bias.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_conv_same_with_stride_pads_as_tensorflow() -> None:
    """``"same"`` at stride 2 on an even length pads (0, 1): PyTorch's explicit padding on the padded input."""
    torch = pytest.importorskip("torch")
    x_axes = image(2, 8, 7)
    layer = Conv((3, 3, 3), strides=2, padding="same", init=Uniform(-1, 1))
    x_value = random_input(x_axes)
    (y, gx, gw), (w,), R = _run(layer, x_axes, x_value, lambda lyr: [lyr.filter.W])
    assert y.shape == (3, 4, 4, 2)  # ceil(8 / 2), ceil(7 / 2)
    xt = torch_tensor(x_value, requires_grad=True)
    weight = _torch_filter(w)
    # H: total (4 - 1) * 2 + 3 - 8 = 1 -> (0, 1); W: (4 - 1) * 2 + 3 - 7 = 2 -> (1, 1)
    yt = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, (1, 1, 0, 1)), weight, stride=2)
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gw, np.moveaxis(weight.grad.numpy(), 0, -1), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("spatial, c, fshape, strides, padding, output_padding, dilation", [
    ((4, 4), 3, (3, 3, 2), 1, 0, 0, 1),
    ((3, 4), 2, (4, 4, 3), 2, 1, 0, 1),
    ((3, 3), 2, (3, 3, 3), 2, 1, 1, 1),
    ((4, 3), 3, (3, 2, 2), (3, 2), (1, 0), (2, 1), (1, 2)),
    ((5,), 2, (3, 2), 2, 0, 1, 2),
], ids=["plain", "stride2-k4", "output-padding", "rect-mixed", "1d"])
def test_deconv_matches_torch(spatial, c, fshape, strides, padding, output_padding, dilation) -> None:
    torch = pytest.importorskip("torch")
    rank = len(spatial)
    x_axes = image(c, *spatial, n=2)
    layer = Deconv(fshape, strides, padding, output_padding, dilation, init=Uniform(-1, 1), bias=Uniform(-1, 1))
    x_value = random_input(x_axes)
    (y, gx, gw, gb), (w, b), R = _run(layer, x_axes, x_value, lambda lyr: [lyr.filter.W, lyr.bias.b])

    module = getattr(torch.nn, f"ConvTranspose{rank}d")(c, fshape[-1], fshape[:-1], strides, padding, output_padding,
                                                         dilation=dilation).double()
    module.weight, module.bias = _torch_filter(w), torch.nn.Parameter(torch.tensor(b))
    xt = torch_tensor(x_value, requires_grad=True)
    yt = module(xt)
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gw, np.moveaxis(module.weight.grad.numpy(), 0, -1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gb, module.bias.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_conv_with_batch_norm_matches_torch_conv_then_batchnorm2d() -> None:
    torch = pytest.importorskip("torch")
    x_axes = image(3, 6, 6, n=4)
    layer = Conv((3, 3, 4), padding=1, init=Uniform(-1, 1), batch_norm=True, activation="relu")
    x_value = random_input(x_axes)
    (y, gx, gw), (w,), R = _run(layer, x_axes, x_value, lambda lyr: [lyr.filter.W])
    conv = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False).double()
    conv.weight = _torch_filter(w)
    bn = torch.nn.BatchNorm2d(4, eps=1e-3).double().train()
    xt = torch_tensor(x_value, requires_grad=True)
    yt = torch.relu(bn(conv(xt)))
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gw, np.moveaxis(conv.weight.grad.numpy(), 0, -1), rtol=1e-8, atol=1e-10)


# -- initial values: fans as PyTorch counts them ------------------------------------------------------

def _initial(layer, x_axes) -> np.ndarray:
    layer(ng.placeholder(x_axes))
    with ng.transformers.make_transformer() as t:
        return t.read_variable(layer.filter.W)


def test_glorot_filter_uses_fan_in_and_fan_out_times_the_window() -> None:
    """fan_in = C * R * S = 8 * 9, fan_out = K * R * S = 32 * 9 (not K, nor the filter's first axis C)."""
    assert compute_fans((32, 8, 3, 3), receptive_field=9) == (72, 288)  # drawn as (K, C, R, S)
    w = _initial(Conv((3, 3, 32), init=GlorotUniform(seed=0)), image(8, 6, 6))
    bound = math.sqrt(6.0 / (8 * 9 + 32 * 9))
    assert w.shape == (8, 3, 3, 32)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    np.testing.assert_allclose(w.std(), bound / math.sqrt(3), rtol=0.05)


def test_kaiming_filter_uses_fan_in_per_group() -> None:
    w = _initial(Conv((3, 3, 64), init=Kaiming(seed=0), groups=2), image(16, 6, 6))
    assert w.shape == (8, 3, 3, 64)  # C / groups = 8 input channels per group
    np.testing.assert_allclose(w.std(), math.sqrt(2.0 / (8 * 9)), rtol=0.05)


def test_deconv_filter_fans_count_its_input_channels_as_fan_in() -> None:
    w = _initial(Deconv((4, 4, 16), strides=2, init=GlorotUniform(seed=0)), image(32, 3, 3))
    assert w.shape == (16, 4, 4, 32)
    bound = math.sqrt(6.0 / (32 * 16 + 16 * 16))
    assert bound * 0.95 < np.abs(w).max() <= bound


# -- sharing, scopes ------------------------------------------------------------------------------------

def test_calling_a_conv_twice_shares_its_filter() -> None:
    layer = Conv((3, 3, 2), padding=1, init=Uniform(-1, 1), bias=Constant(0.5))
    a = ng.placeholder(image(2, 4, 4))
    b = ng.placeholder([axis("K", 2), axis("H", 4), axis("W", 4), axis("N", 3)])  # another channel name, another N
    ya, yb = layer(a), layer(b)
    assert len(layer.variables) == 2 and yb.axes.lengths == (2, 4, 4, 3)
    value = random_input(a.axes)
    out_a, out_b = run_float64([ya, yb], a, value, b, value[..., :1].repeat(3, axis=-1))
    np.testing.assert_allclose(out_b[..., 0], out_a[..., 0], rtol=1e-12)
    scopes = {v.name: tuple(e.name for e in v.meta.scope) for v in layer.variables}
    assert scopes["W"] == (layer.name, "Convolution_0") and scopes["b"] == (layer.name, "Bias_0")


# -- bad configs and inputs raise LayerError with expected vs received and a hint --------------------------

@pytest.mark.parametrize("make, words", [
    (lambda: Conv(3), ["fshape", "(*window, K)", "received: 3", "hint"]),
    (lambda: Conv((3, 3, 3, 3, 3)), ["fshape", "1 to 3 window lengths", "hint"]),
    (lambda: Conv((3, 0, 4)), ["fshape", "ints >= 1", "hint"]),
    (lambda: Conv((3, 3, 4), strides=0), ["strides", "received: 0", "hint"]),
    (lambda: Conv((3, 3, 4), strides=(1, 1, 1)), ["strides", "2 ints", "hint"]),
    (lambda: Conv((3, 3, 4), padding="full"), ["padding", "'same'", "'full'", "hint"]),
    (lambda: Conv((3, 3, 4), padding=-1), ["padding", "-1", "hint"]),
    (lambda: Conv((3, 3, 4), dilation=(1, 0)), ["dilation", "hint"]),
    (lambda: Conv((3, 3, 4), groups=3), ["groups dividing K = 4", "hint"]),
    (lambda: Conv((3, 3, 4), batch_norm=1), ["batch_norm", "bool", "hint"]),
    (lambda: Conv((3, 3, 4), activation="relux"), ["relux"]),
    (lambda: Deconv((3, 3, 4), padding="same"), ["numeric padding", "hint"]),
    (lambda: Deconv((3, 3, 4), strides=2, output_padding=2), ["output_padding < stride", "hint"]),
])
def test_bad_configs_raise_layer_error(make, words) -> None:
    with pytest.raises(LayerError) as info:
        make()
    for word in (*words, "expected"):
        assert word in str(info.value)


def test_conv_config_errors_name_the_conv_the_user_made() -> None:
    with pytest.raises(LayerError, match=r"^c1 \(Conv\) > Convolution_0 \(Convolution\): expected strides"):
        Conv((3, 3, 4), strides=-1, name="c1")


@pytest.mark.parametrize("make, x_axes, pattern", [
    (lambda: Conv((3, 3, 4), name="c"), [axis("C", 3), axis("H", 8), axis("W", 8)],
     r"c \(Conv\) > Convolution_0 \(Convolution\): expected an image \[C, H, W, N\].*received: \[C:3, H:8, W:8\]"
     r".*hint: name the batch axis 'N'"),
    (lambda: Conv((3, 3, 4)), [axis("F", 8), axis("N", 2)],
     r"expected an image \[C, H, W, N\]: a batch axis N, a channel axis and 2 spatial axes.*received: \[F:8, N:2\]"
     r".*hint: .*lshape=\(1, H, W\)"),
    (lambda: Conv((3, 3, 3, 4)), image(2, 8, 8), r"3 spatial axes.*received: \[C:2, H:8, W:8, N:2\]"),
    (lambda: Conv((5, 5, 4), padding=1), image(2, 2, 8), r"Conv_\d+ \(Conv\) > .*kernel spans 5.*larger than the "
     r"padded input.*hint"),
    (lambda: Conv((3, 3, 4), groups=4), image(6, 8, 8), r"input channels divisible by groups=4.*received: \[C:6"),
    (lambda: Conv((3, 3, 4), name="H"), image(2, 8, 8), r"without an axis named 'H'"),
    (lambda: Deconv((3, 3, 4)), [axis("C", 3), axis("N", 2)], r"expected an image \[C, H, W, N\]"),
    (lambda: Conv((3, 3, 4)), [axis("R", 3), axis("H", 8), axis("W", 8), axis("N", 2)],
     r"channel axes not named 'R' or 'S'"),
    # the issue: Conv((3, 3)) read as a 1-D conv of 3 filters, and the error hinted at lshape
    (lambda: Conv((3, 3)), image(1, 8, 8),
     r"Conv_\d+ \(Conv\) > Convolution_0 \(Convolution\): expected fshape as \(\*window, K\): 2 window lengths for "
     r"the input's 2 spatial axes, then K, the filter count, received: fshape=\(3, 3\) for input \[C:1, H:8, W:8, "
     r"N:2\]; hint: the filter count is missing: .* write fshape=\(3, 3, K\), e.g. Conv\(\(3, 3, 64\)\)"),
    (lambda: Conv((3, 3, 3)), [axis("C", 1), axis("D", 4), axis("H", 8), axis("W", 8), axis("N", 2)],
     r"the filter count is missing: \(3, 3, 3\) reads as a 2-D window \(3, 3\) of K=3 filters"),
    (lambda: Deconv((4, 4)), image(2, 8, 8), r"filter count is missing.*e.g. Deconv\(\(4, 4, 64\)\)"),
])
def test_bad_inputs_raise_layer_error(make, x_axes, pattern) -> None:
    with pytest.raises(LayerError, match=pattern):
        make()(ng.placeholder(x_axes))


def test_a_later_input_with_other_channels_is_rejected() -> None:
    layer = Conv((3, 3, 4), name="c")
    layer(ng.placeholder(image(2, 8, 8)))
    with pytest.raises(LayerError, match=r"expected 2 input channels \(the layer was built for them\).*received: "
                                         r"\[C:3, H:8, W:8, N:2\].*hint"):
        layer(ng.placeholder(image(3, 8, 8)))
