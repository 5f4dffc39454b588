"""Convolution, transposed convolution and pooling: sweeps against PyTorch, finite differences, bad configurations.

Activations are ``[C, *spatial, N]`` and filters ``[Ci, *filter_spatial, K]`` (roles by position);
PyTorch's layouts are ``(N, C, *spatial)`` and ``(K, Ci, *k)``, so every PyTorch call permutes.
The sweeps run in float64 through ``check_op_torch`` (forward and every input's gradient);
``check_op`` adds float32 runs against the direct NumPy references and finite differences.
"""

from __future__ import annotations

import warnings
from typing import Any

import nn_reference as nn_ref
import numpy as np
import pytest
from op_helper import arg, check_op, check_op_torch

import ngraph_core as ng
from ngraph_core import OpType as T
from ngraph_core.errors import AxesError, DTypeError, UnsupportedOpError
from ngraph_core.transformers.kernels import conv as conv_kernels

try:
    import torch
    F = torch.nn.functional
except ImportError:  # the PyTorch comparisons skip (check_op_torch); the rest still runs
    torch = F = None

SPATIAL = {1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}
FILTER = {1: ("S",), 2: ("R", "S"), 3: ("T", "R", "S")}
N = ng.make_axis(2, "N")


def image(c: int, lengths: tuple[int, ...], name: str = "C") -> list[ng.Axis]:
    """Axes ``[C, *spatial, N]`` of a ``len(lengths)``-D activation."""
    return [ng.make_axis(c, name), *(ng.make_axis(n, s) for n, s in zip(lengths, SPATIAL[len(lengths)])), N]


def kernel(ci: int, fshape: tuple[int, ...], k: int, first: str = "Ci", last: str = "K") -> list[ng.Axis]:
    """Axes ``[Ci, *filter_spatial, K]`` of a filter."""
    return [ng.make_axis(ci, first), *(ng.make_axis(n, s) for n, s in zip(fshape, FILTER[len(fshape)])),
            ng.make_axis(k, last)]


def to_torch(t: Any) -> Any:
    """[C, *spatial, N] -> (N, C, *spatial); a filter [Ci, *k, K] -> (K, Ci, *k)."""
    return t.permute(t.dim() - 1, *range(t.dim() - 1))


def from_torch(t: Any) -> Any:
    """(N, C, *spatial) -> [C, *spatial, N]."""
    return t.permute(*range(1, t.dim()), 0)


def torch_padding(x: Any, padding: Any, rank: int) -> tuple[Any, Any]:
    """(input, padding for torch): explicit (before, after) pairs become an F.pad of the input."""
    if isinstance(padding, tuple) and any(isinstance(p, tuple) for p in padding):
        pairs = [p if isinstance(p, tuple) else (p, p) for p in padding]
        flat = [v for pair in reversed(pairs) for v in pair]
        return F.pad(x, flat), 0
    return x, padding


def torch_conv(x: Any, w: Any, rank: int, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
               groups: int = 1) -> Any:
    fn = (F.conv1d, F.conv2d, F.conv3d)[rank - 1]
    x, padding = torch_padding(to_torch(x), padding, rank)
    with warnings.catch_warnings():  # 'same' with an even kernel: PyTorch warns about a padded copy
        warnings.simplefilter("ignore")
        return from_torch(fn(x, to_torch(w), stride=strides, padding=padding, dilation=dilation, groups=groups))


@pytest.fixture(params=["whole", "row_blocks"])
def col_blocks(request: Any, monkeypatch: Any) -> None:
    """Run a test with the col matrix in one block, and with one output row per block (the blocked loops)."""
    if request.param == "row_blocks":
        monkeypatch.setattr(conv_kernels, "COL_BLOCK_BYTES", 1)


# -- convolution sweep: (id, C, K, lengths, fshape, kwargs) ------------------------------------------------
CONV_CASES = [
    ("valid_3x3", 3, 5, (7, 6), (3, 3), {}),
    ("pad1", 3, 5, (7, 6), (3, 3), {"padding": 1}),
    ("same_3x3", 4, 6, (7, 6), (3, 3), {"padding": "same"}),
    ("same_even_2x4", 4, 6, (7, 6), (2, 4), {"padding": "same"}),
    ("same_dilated", 4, 6, (9, 8), (3, 2), {"padding": "same", "dilation": (2, 3)}),
    ("stride2", 3, 5, (7, 6), (3, 3), {"strides": 2}),
    ("stride2_pad1", 3, 5, (8, 7), (3, 3), {"strides": 2, "padding": 1}),
    ("stride_2x1_pad_1x0", 4, 6, (7, 6), (3, 2), {"strides": (2, 1), "padding": (1, 0)}),
    ("stride3_pad2", 2, 3, (9, 8), (3, 3), {"strides": 3, "padding": 2}),
    ("stride_larger_than_kernel", 2, 3, (9, 8), (2, 2), {"strides": 3}),
    ("dilation2", 3, 4, (9, 8), (3, 3), {"dilation": 2}),
    ("dilation_1x2_pad", 3, 4, (7, 8), (3, 3), {"dilation": (1, 2), "padding": (1, 2)}),
    ("dilation2_stride2_pad2", 3, 4, (9, 9), (3, 3), {"dilation": 2, "strides": 2, "padding": 2}),
    ("asymmetric_pad", 3, 4, (6, 5), (3, 3), {"padding": ((0, 2), (1, 0))}),
    ("asymmetric_pad_stride", 3, 4, (7, 6), (3, 2), {"padding": ((2, 1), (0, 3)), "strides": (2, 3)}),
    ("fewer_out_channels_pad1", 6, 4, (7, 6), (3, 3), {"padding": 1}),  # dX as a convolution (C >= K)
    ("fewer_out_channels_dilated_same", 5, 3, (9, 8), (3, 2), {"padding": "same", "dilation": (2, 1)}),
    ("fewer_out_channels_groups", 6, 4, (6, 5), (3, 3), {"padding": 1, "groups": 2}),
    ("pointwise", 5, 3, (4, 5), (1, 1), {}),
    ("pointwise_stride2", 5, 3, (7, 6), (1, 1), {"strides": 2}),
    ("pointwise_pad", 5, 3, (4, 5), (1, 1), {"padding": 1}),
    ("kernel_1x3", 3, 4, (5, 7), (1, 3), {"padding": (0, 1)}),
    ("kernel_5x5_pad2", 2, 3, (7, 6), (5, 5), {"padding": 2}),
    ("kernel_equals_input", 2, 3, (4, 5), (4, 5), {}),
    ("kernel_equals_padded_input", 2, 3, (3, 3), (5, 5), {"padding": 1}),
    ("groups2", 4, 6, (6, 5), (3, 3), {"groups": 2, "padding": 1}),
    ("groups2_stride2", 4, 6, (7, 6), (3, 3), {"groups": 2, "strides": 2}),
    ("groups2_dilated_asym", 4, 8, (9, 8), (3, 2), {"groups": 2, "dilation": (2, 1), "padding": ((1, 2), (0, 1))}),
    ("depthwise", 4, 4, (6, 5), (3, 3), {"groups": 4, "padding": 1}),
    ("depthwise_multiplier2", 3, 6, (6, 5), (3, 3), {"groups": 3, "padding": "same"}),
    ("groups4_pointwise", 8, 4, (5, 4), (1, 1), {"groups": 4}),
    ("one_by_one_image", 3, 4, (1, 1), (3, 3), {"padding": 1}),
    # filter taps that read only padding are cut from the forward GEMM (kernels/conv.live_taps)
    ("dead_taps_stride2", 3, 4, (2, 2), (3, 3), {"strides": 2, "padding": 1}),
    ("dead_taps_dilated", 2, 3, (2, 3), (3, 3), {"dilation": 2, "padding": 2}),
    ("dead_taps_groups", 4, 6, (1, 2), (3, 3), {"groups": 2, "padding": 1}),
    ("dead_taps_1d_front_pad", 2, 3, (2,), (5,), {"padding": ((4, 0),)}),
    ("dead_taps_3d", 2, 3, (1, 2, 1), (3, 3, 3), {"padding": 1}),
    ("conv1d", 3, 4, (9,), (3,), {"padding": 1}),
    ("conv1d_stride_dilation", 4, 6, (11,), (3,), {"strides": 2, "dilation": 2, "groups": 2}),
    ("conv1d_same_even", 3, 4, (8,), (4,), {"padding": "same"}),
    ("conv3d", 2, 3, (4, 5, 4), (3, 3, 3), {"padding": 1}),
    ("conv3d_strided", 2, 4, (5, 6, 5), (2, 3, 2), {"strides": (2, 1, 2), "padding": (0, 1, 1), "groups": 2}),
    ("conv3d_same", 2, 3, (4, 4, 5), (3, 2, 3), {"padding": "same", "dilation": (1, 2, 1)}),
]


@pytest.mark.usefixtures("col_blocks")
@pytest.mark.parametrize("c, k, lengths, fshape, kw", [pytest.param(*case[1:], id=case[0]) for case in CONV_CASES])
def test_convolution_vs_torch(c: int, k: int, lengths: tuple, fshape: tuple, kw: dict) -> None:
    """Forward and both gradients (data, filter) in float64 against PyTorch's convNd."""
    rank, groups = len(lengths), kw.get("groups", 1)
    check_op_torch(lambda x, w: ng.convolution(x, w, **kw), lambda x, w: torch_conv(x, w, rank, **kw),
                   [arg(*image(c, lengths)), arg(*kernel(c // groups, fshape, k))])


@pytest.mark.usefixtures("col_blocks")
@pytest.mark.parametrize("order", ["NCHW", "CNHW", "HWCN"])
def test_convolution_input_axis_orders(order: str) -> None:
    """Roles are read by position: the channel axis is the first non-batch axis, N stands anywhere."""
    axes = {a.name: a for a in image(3, (6, 5))}
    x_axes = [axes[n] for n in ("N" if ch == "N" else ch for ch in order)]
    channel = next(a for a in x_axes if not a.is_batch)
    perm = [x_axes.index(a) for a in (channel, *(a for a in x_axes if a is not channel and not a.is_batch), axes["N"])]
    w = kernel(channel.length, (3, 2), 4)

    def reference(x: Any, wt: Any) -> Any:
        return torch_conv(x.permute(*perm), wt, 2, strides=(2, 1), padding=1)

    check_op_torch(lambda x, wv: ng.convolution(x, wv, strides=(2, 1), padding=1), reference, [arg(*x_axes), arg(*w)])


def test_convolution_output_axes() -> None:
    """[K, *spatial, N]: the filter's last axis, then the input's spatial names with new lengths."""
    x = ng.placeholder([ng.make_axis(8, "H"), ng.make_axis(3, "C"), ng.make_axis(4, "N"), ng.make_axis(9, "W")])
    y = ng.convolution(x, ng.placeholder(kernel(8, (3, 3), 16, last="F")), strides=2, padding=1)
    assert [(a.name, a.length) for a in y.axes] == [("F", 16), ("C", 2), ("W", 5), ("N", 4)]


# -- transposed convolution: (id, C, Co, lengths, fshape, kwargs); w is [Co, *k, C] ---------------------------
DECONV_CASES = [
    ("plain", 3, 2, (4, 5), (3, 3), {}),
    ("pad1", 3, 2, (4, 5), (3, 3), {"padding": 1}),
    ("stride2", 3, 2, (4, 3), (3, 3), {"strides": 2}),
    ("stride2_pad1_out1", 3, 2, (4, 3), (3, 3), {"strides": 2, "padding": 1, "output_padding": 1}),
    ("stride2_kernel4_pad1", 4, 3, (3, 4), (4, 4), {"strides": 2, "padding": 1}),
    ("stride_3x2_out_2x1", 2, 3, (3, 4), (3, 2), {"strides": (3, 2), "output_padding": (2, 1), "padding": (1, 0)}),
    ("dilation2", 3, 2, (4, 4), (3, 2), {"dilation": 2, "padding": 1}),
    ("asymmetric_pad", 3, 2, (4, 5), (3, 3), {"padding": ((2, 0), (0, 1)), "strides": 2}),
    ("groups2", 4, 3, (4, 3), (3, 3), {"groups": 2, "strides": 2, "padding": 1, "output_padding": 1}),
    ("depthwise", 4, 1, (4, 5), (3, 3), {"groups": 4, "padding": 1}),
    ("pointwise_stride2", 3, 2, (3, 4), (1, 1), {"strides": 2, "output_padding": 1}),
    ("deconv1d", 3, 2, (5,), (4,), {"strides": 2, "padding": 1}),
    ("deconv3d", 2, 2, (3, 2, 3), (3, 2, 2), {"strides": (2, 1, 2), "padding": (1, 0, 0), "output_padding": (1, 0, 1)}),
]


def torch_deconv(x: Any, w: Any, rank: int, strides: Any = 1, padding: Any = 0, output_padding: Any = 0,
                 dilation: Any = 1, groups: int = 1) -> Any:
    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[rank - 1]
    crop = None
    if isinstance(padding, tuple) and any(isinstance(p, tuple) for p in padding):
        crop, padding = padding, 0  # asymmetric: transpose without padding, then crop
    y = fn(to_torch(x), to_torch(w), stride=strides, padding=padding, output_padding=output_padding,
           dilation=dilation, groups=groups)
    if crop is not None:
        y = y[(slice(None), slice(None), *(slice(b, y.shape[2 + i] - a) for i, (b, a) in enumerate(crop)))]
    return from_torch(y)


@pytest.mark.usefixtures("col_blocks")
@pytest.mark.parametrize("c, co, lengths, fshape, kw", [pytest.param(*case[1:], id=case[0]) for case in DECONV_CASES])
def test_deconvolution_vs_torch(c: int, co: int, lengths: tuple, fshape: tuple, kw: dict) -> None:
    """Forward and gradients in float64 against PyTorch's conv_transposeNd (weight (C, Co, *k) = our w moved)."""
    rank = len(lengths)
    check_op_torch(lambda x, w: ng.deconvolution(x, w, **kw), lambda x, w: torch_deconv(x, w, rank, **kw),
                   [arg(*image(c, lengths)), arg(*kernel(co, fshape, c, first="Co", last="C"))])


def test_deconvolution_inverts_convolution_shape() -> None:
    """deconvolution with a convolution's filter and arguments maps its output shape back to its input's."""
    x = ng.placeholder(image(3, (9, 8)))
    w = ng.placeholder(kernel(3, (3, 3), 5, first="C"))
    y = ng.convolution(x, w, strides=2, padding=1)
    back = ng.deconvolution(y, w, strides=2, padding=1, output_padding=(0, 1))
    assert back.axes == x.axes and back.op is T.CONV_BPROP_DATA


# -- pooling: (id, lengths, kwargs) ------------------------------------------------------------------------
POOL_CASES = [
    ("2x2", (6, 8), {"fshape": 2}),
    ("2x2_odd", (7, 5), {"fshape": 2}),
    ("2x2_odd_ceil", (7, 5), {"fshape": 2, "ceil_mode": True}),
    ("3x3_stride1", (5, 6), {"fshape": 3, "strides": 1}),
    ("3x3_stride1_pad1", (5, 6), {"fshape": 3, "strides": 1, "padding": 1}),
    ("3x3_stride2_pad1", (7, 8), {"fshape": 3, "strides": 2, "padding": 1}),
    ("3x3_stride2_pad1_ceil", (8, 7), {"fshape": 3, "strides": 2, "padding": 1, "ceil_mode": True}),
    ("3x3_stride2_ceil", (6, 7), {"fshape": 3, "strides": 2, "ceil_mode": True}),
    ("3x2_stride_2x1", (7, 6), {"fshape": (3, 2), "strides": (2, 1)}),
    ("3x2_pad_1x1_ceil", (6, 5), {"fshape": (3, 2), "strides": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    ("stride_larger_than_window", (9, 8), {"fshape": 2, "strides": 3}),
    ("stride_larger_ceil", (8, 7), {"fshape": 2, "strides": 3, "ceil_mode": True}),
    ("window_equals_input", (4, 5), {"fshape": (4, 5)}),
    ("4x4_pad2_stride3_ceil", (7, 9), {"fshape": 4, "strides": 3, "padding": 2, "ceil_mode": True}),
    ("pool1d", (9,), {"fshape": 3, "strides": 2, "padding": 1}),
    ("pool1d_ceil", (8,), {"fshape": 2, "ceil_mode": True}),
    ("pool3d", (4, 5, 4), {"fshape": 2, "strides": (2, 1, 2), "padding": (1, 0, 1)}),
    ("pool3d_ceil", (5, 4, 5), {"fshape": (3, 2, 2), "strides": 2, "ceil_mode": True}),
]


def torch_pool(x: Any, op: str, rank: int, fshape: Any, strides: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Any:
    strides = fshape if strides is None else strides
    if op == "max":
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[rank - 1]
        return from_torch(fn(to_torch(x), fshape, strides, padding, ceil_mode=ceil_mode))
    fn = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[rank - 1]
    return from_torch(fn(to_torch(x), fshape, strides, padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad))


def _pool_params() -> list[Any]:
    params = []
    for name, lengths, kw in POOL_CASES:
        for op in ("max", "max_ties", "avg", "avg_exclude_pad"):
            if op == "avg_exclude_pad":
                if not kw.get("padding") and not kw.get("ceil_mode"):
                    continue  # without padding or ceil mode every window divides by its size
                kw = {**kw, "count_include_pad": False}
            params.append(pytest.param(op, lengths, kw, id=f"{op}-{name}"))
    return params


@pytest.mark.parametrize("op, lengths, kw", _pool_params())
def test_pooling_vs_torch(op: str, lengths: tuple, kw: dict) -> None:
    """Forward and gradient in float64 against PyTorch: max (ties go to the first maximum), avg (padding
    counted as PyTorch's count_include_pad=True, and not counted)."""
    kind, rank = op.split("_")[0], len(lengths)
    axes = image(3, lengths)
    values = None
    if op == "max_ties":  # small integers: windows hold equal maxima
        values = np.random.default_rng(len(lengths) * 31 + sum(lengths)).integers(0, 3, [a.length for a in axes])
    check_op_torch(lambda x: ng.pooling(x, op=kind, **kw), lambda x: torch_pool(x, kind, rank, **kw),
                   [arg(*axes, values=values)])


def test_pooling_keeps_axis_order() -> None:
    """The output keeps the input's axes order and names; N may stand first."""
    x = ng.placeholder([N, ng.make_axis(3, "C"), ng.make_axis(7, "H"), ng.make_axis(6, "W")])
    y = ng.pooling(x, 3, strides=2, padding=1, ceil_mode=True)
    assert [(a.name, a.length) for a in y.axes] == [("N", 2), ("C", 3), ("H", 4), ("W", 4)]
    check_op_torch(lambda v: ng.pooling(v, 3, strides=2, padding=1, ceil_mode=True),
                   lambda v: F.max_pool2d(v, 3, 2, 1, ceil_mode=True), [arg(*x.axes)])


# -- float32 runs against the NumPy references, and finite differences (float64) ----------------------------
def test_convolution_float32_and_finite_differences() -> None:
    kw = {"strides": (2, 1), "padding": ((1, 0), (2, 1)), "dilation": (1, 2), "groups": 2}
    check_op(lambda x, w: ng.convolution(x, w, **kw),
             lambda x, w: nn_ref.conv(x, w, (2, 1), ((1, 0), (2, 1)), (1, 2), groups=2),
             [arg(*image(4, (5, 4))), arg(*kernel(2, (3, 2), 4))], covers=[T.CONV])


def test_deconvolution_float32_and_finite_differences() -> None:
    check_op(lambda x, w: ng.deconvolution(x, w, strides=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2),
             lambda x, w: nn_ref.deconv(x, w, (2, 1), ((1, 1), (0, 0)), (1, 0), (1, 1), groups=2),
             [arg(*image(4, (3, 4))), arg(*kernel(1, (3, 2), 4, first="Co", last="C"))], covers=[T.CONV_BPROP_DATA])


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pooling_float32_and_finite_differences(op: str) -> None:
    check_op(lambda x: ng.pooling(x, 3, op=op, strides=2, padding=1, ceil_mode=True, count_include_pad=False),
             lambda x: nn_ref.pool(x, op, (3, 3), (2, 2), (1, 1), ceil_mode=True, count_include_pad=False),
             [arg(*image(2, (6, 5)))], covers=[T.POOL])


def test_float32_large_conv_matches_reference() -> None:
    """A CIFAR-sized layer in float32 (im2col buffers, repeated calls reuse the workspace)."""
    check_op(lambda x, w: ng.convolution(x, w, padding=1),
             lambda x, w: nn_ref.conv(x, w, (1, 1), ((1, 1),) * 2, (1, 1)),
             [arg(*image(8, (16, 16))), arg(*kernel(8, (3, 3), 16))], grad=False, atol=1e-4, rtol=1e-4)


# -- second derivatives --------------------------------------------------------------------------------------
def test_second_derivative_through_convolution() -> None:
    """d/dx and d/dw of (d sum(conv(x, w)^2) / dx): conv_bprop_data and conv_bprop_filter differentiated."""
    kw = {"strides": 2, "padding": 1}

    def build(x: ng.Op, w: ng.Op) -> ng.Op:
        y = ng.convolution(x, w, **kw)
        return ng.deriv(ng.sum(y * y), x)

    def reference(x: Any, w: Any) -> Any:
        y = torch_conv(x, w, 2, **kw)
        return torch.autograd.grad((y * y).sum(), x, create_graph=True)[0]

    inputs = [arg(*image(2, (5, 4))), arg(*kernel(2, (3, 3), 3))]
    check_op(build, None, inputs)
    check_op_torch(build, reference, inputs)


def test_second_derivative_through_avg_pooling() -> None:
    def build(x: ng.Op) -> ng.Op:
        y = ng.pooling(x, 3, op="avg", strides=2, padding=1)
        return ng.deriv(ng.sum(y * y * y), x)

    def reference(x: Any) -> Any:
        y = torch_pool(x, "avg", 2, 3, 2, 1)
        return torch.autograd.grad((y * y * y).sum(), x, create_graph=True)[0]

    inputs = [arg(*image(2, (5, 6)))]
    check_op(build, None, inputs)
    check_op_torch(build, reference, inputs)


def test_second_derivative_through_max_pooling_is_refused() -> None:
    x = ng.variable(image(2, (4, 4)), initial_value=1.0)
    g = ng.deriv(ng.sum(ng.pooling(x, 2) * ng.pooling(x, 2)), x)
    with pytest.raises(UnsupportedOpError, match="max pooling"):
        ng.deriv(ng.sum(g * g), x)


# -- bad configurations --------------------------------------------------------------------------------------
X = ng.placeholder(image(4, (6, 5)))


def w_(ci: int = 4, fshape: tuple = (3, 3), k: int = 6) -> ng.Op:
    return ng.placeholder(kernel(ci, fshape, k))


BAD = [
    ("kernel_larger_than_padded_input", lambda: ng.convolution(X, w_(fshape=(7, 3))), "larger than the padded input"),
    ("dilated_kernel_too_large", lambda: ng.convolution(X, w_(), dilation=3), "larger than the padded input"),
    ("channels_not_divisible", lambda: ng.convolution(X, w_(ci=1), groups=3), "not divisible by groups"),
    ("filter_channels_not_c_over_groups", lambda: ng.convolution(X, w_(ci=4), groups=2), "C/groups = 2"),
    ("k_not_divisible", lambda: ng.convolution(X, w_(ci=2, k=5), groups=2), "not divisible by groups"),
    ("filter_rank", lambda: ng.convolution(X, w_(fshape=(3,))), "spatial axes"),
    ("filter_rank_3d", lambda: ng.convolution(X, w_(fshape=(3, 3, 3))), "spatial axes"),
    ("zero_stride", lambda: ng.convolution(X, w_(), strides=0), "positive strides"),
    ("negative_dilation", lambda: ng.convolution(X, w_(), dilation=(1, -1)), "positive dilations"),
    ("negative_padding", lambda: ng.convolution(X, w_(), padding=-1), "non-negative padding"),
    ("same_with_stride", lambda: ng.convolution(X, w_(), strides=2, padding="same"), "strides of 1"),
    ("unknown_padding", lambda: ng.convolution(X, w_(), padding="full"), "'same', 'valid'"),
    ("strides_per_axis_count", lambda: ng.convolution(X, w_(), strides=(1, 1, 1)), "one per spatial axis"),
    ("no_batch_axis", lambda: ng.convolution(ng.placeholder(image(4, (6, 5))[:-1]), w_()), "batch axis N"),
    ("only_batch_and_channel", lambda: ng.convolution(ng.placeholder([ng.make_axis(4, "C"), N]), w_()),
     "1 to 3 spatial"),
    ("filter_with_batch_axis",
     lambda: ng.convolution(X, ng.placeholder([ng.make_axis(4, "C"), N, ng.make_axis(2, "K")])), "no batch axis"),
    ("deconv_output_padding", lambda: ng.deconvolution(ng.placeholder(image(6, (3, 3))), w_(ci=4, k=6), strides=2,
                                                       output_padding=2), "output_padding < stride"),
    ("deconv_channels", lambda: ng.deconvolution(ng.placeholder(image(5, (3, 3))), w_(ci=4, k=6)), "K:6"),
    ("deconv_too_much_padding", lambda: ng.deconvolution(ng.placeholder(image(6, (1, 1))), w_(ci=4, k=6), padding=2),
     "not positive"),
    ("pool_padding_over_half", lambda: ng.pooling(X, 2, padding=2), "half the window"),
    ("pool_window_too_large", lambda: ng.pooling(X, 7), "larger than the padded input"),
    ("pool_unknown_op", lambda: ng.pooling(X, 2, op="min"), "op among"),
    ("pool_zero_window", lambda: ng.pooling(X, 0), "positive window"),
    ("pool_fshape_rank", lambda: ng.pooling(X, (2, 2, 2)), "one per spatial axis"),
]


@pytest.mark.parametrize("build, match", [pytest.param(*case[1:], id=case[0]) for case in BAD])
def test_bad_configurations_raise_axes_error(build: Any, match: str) -> None:
    with pytest.raises(AxesError, match=match) as info:
        build()
    message = str(info.value)
    assert "expected" in message.lower() or "hint" in message, message


def test_integer_inputs_raise_dtype_error() -> None:
    with pytest.raises(DTypeError, match="float"):
        ng.convolution(ng.placeholder(image(4, (6, 5)), dtype="int32"), w_())
    with pytest.raises(DTypeError, match="float"):
        ng.pooling(ng.placeholder(image(4, (6, 5)), dtype="int64"), 2)


# -- compilation: memory plan, fusion, workspace, serialization of a trained step ---------------------------------
def _small_cnn() -> tuple[ng.Op, ng.Op, list[ng.Op], ng.Op]:
    rng = np.random.default_rng(0)
    x = ng.placeholder(image(3, (8, 8)), name="x")
    w1 = ng.variable(kernel(3, (3, 3), 4, first="C", last="K1"), initial_value=rng.normal(0, 0.3, (3, 3, 3, 4)))
    b1 = ng.variable([ng.make_axis(4, "K1")], initial_value=0.1)
    w2 = ng.variable(kernel(4, (3, 3), 5, first="K1", last="K2"), initial_value=rng.normal(0, 0.3, (4, 3, 3, 5)))
    h = ng.relu(ng.convolution(x, w1, padding=1) + b1)
    h = ng.pooling(h, 2)
    h = ng.pooling(ng.relu(ng.convolution(h, w2, padding=1, strides=2)), 2, op="avg")
    loss = ng.sum(h * h) / 2.0
    return x, loss, [w1, b1, w2], h


def test_training_step_optimized_equals_unoptimized() -> None:
    """Fusion, layout, in-place reuse and the memory plan leave a conv net's step unchanged."""
    x, loss, params, _ = _small_cnn()
    grads = ng.gradients(loss, params)
    feed = np.random.default_rng(1).normal(size=x.axes.lengths)
    values = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(float_dtype="float64", optimize=optimize) as t:
            f = t.computation([loss, *grads], x)
            values.append(f(feed))
            kinds = {op.op for op in f.graph.order}
            assert {T.CONV, T.CONV_BPROP_DATA, T.CONV_BPROP_FILTER, T.POOL, T.POOL_BPROP} <= kinds
            planned = set(f.memory_plan.offsets)
            assert all(op in planned for op in f.graph.order if op.op in ng.OpGroup.NN and op not in f.graph.results)
    for a, b in zip(*values):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_fusion_takes_convolution_as_the_head_of_its_epilogue() -> None:
    x, _, _, _ = _small_cnn()
    w = ng.variable(kernel(3, (3, 3), 4, first="C", last="K1"), initial_value=0.1)
    b = ng.variable([ng.make_axis(4, "K1")], initial_value=0.1)
    y = ng.relu(ng.convolution(x, w, padding=1) + b) * 2.0
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
    fused = [op for op in f.graph.order if op.op is T.FUSED]
    assert len(fused) == 1 and fused[0].arg.head == "conv" and fused[0].src[:2] == (x, w)
    assert not any(op.op is T.CONV for op in f.graph.order)
    assert fused[0] not in f.memory_plan.in_place  # the conv head writes its output before the epilogue reads


def test_kernels_share_one_workspace() -> None:
    """Scratch (im2col, padded copies) is one buffer sized for the greediest kernel, not one per kernel."""
    x = ng.placeholder(image(4, (8, 8)))
    w1, w2 = ng.placeholder(kernel(4, (3, 3), 4, last="C")), ng.placeholder(kernel(4, (3, 3), 4, last="C"))
    one_conv = ng.convolution(x, w1, padding=1)
    with ng.transformers.make_transformer() as t:
        single = t.computation(one_conv, x, w1).workspace_bytes
        two = t.computation(ng.convolution(one_conv, w2, padding=1), x, w1, w2)
        report = two.memory_report()
    assert single > 0 and two.workspace_bytes == single
    assert report.workspace_bytes == single and "workspace" in str(report)  # reported beside the arena


def test_col_matrix_is_built_in_blocks_of_output_rows(monkeypatch: Any) -> None:
    """A smaller block budget means a smaller col buffer: the kernels really loop over row blocks."""
    monkeypatch.setenv("NG_CONV", "im2col")  # the im2col kernels alone (no Winograd scratch)
    monkeypatch.setenv("NG_THREADS", "1")  # one worker: one col buffer (each worker has its own)
    x, w = ng.placeholder(image(4, (8, 8))), ng.placeholder(kernel(4, (3, 3), 4))
    y = ng.convolution(x, w, padding=1)
    dx, dw = ng.gradients(ng.sum(y * y), [x, w])

    def scratch() -> int:
        with ng.transformers.make_transformer() as t:
            return t.computation([y, dx, dw], x, w).workspace_bytes

    whole = scratch()
    monkeypatch.setattr(conv_kernels, "COL_BLOCK_BYTES", 1)
    one_row = scratch()
    # the greediest requests (float32 bytes): a padded copy, col, and a filter-sized buffer (the data
    # gradient's flipped filter, the filter gradient's partial sum)
    padded, filter_sized = 4 * 10 * 10 * 2 * 4, 4 * 9 * 4 * 4
    assert whole == padded + 4 * 9 * 8 * 8 * 2 * 4 + filter_sized  # the whole col matrix (C*R*S, H*W*N)
    assert one_row == padded + 4 * 9 * 8 * 2 * 4 + filter_sized  # one output row of it


def test_batch_norm_bad_inputs_raise_clear_errors() -> None:
    x = ng.placeholder(image(4, (3, 3)))
    c, other = x.axes[0], ng.make_axis(4, "D")
    gamma, beta = ng.variable([c], 1.0), ng.variable([c], 0.0)
    with pytest.raises(AxesError, match="gamma's axes to be feature axes"):
        ng.batch_norm(x, ng.variable([other], 1.0), ng.variable([other], 0.0))
    with pytest.raises(AxesError, match="expected beta with gamma's axes"):
        ng.batch_norm(x, gamma, ng.variable([x.axes[1]], 0.0))
    with pytest.raises(ValueError, match="eps > 0"):
        ng.batch_norm(x, gamma, beta, eps=0.0)
    with pytest.raises(ValueError, match="both mean and var"):
        ng.batch_norm(x, gamma, beta, mean=ng.variable([c], 0.0))
    with pytest.raises(AxesError, match="leaving at least one axis to reduce"):
        ng.moments(x, x.axes)


def test_training_batch_norm_compiles_to_moments_and_one_fused_pass_per_direction() -> None:
    """The forward is moments + one fused normalize(+relu) pass; the backward one centered_sums + one fused dx."""
    x = ng.placeholder(image(4, (3, 3)))
    c = x.axes[0]
    gamma, beta = ng.variable([c], 1.5), ng.variable([c], 0.5)
    y = ng.relu(ng.batch_norm(x, gamma, beta))
    dx = ng.gradients(ng.sum(y * y), [x])[0]
    with ng.transformers.make_transformer() as t:
        kinds = [op.op for op in t.computation([y, dx], x).graph.order]
    assert kinds.count(T.MOMENTS) == 1 and kinds.count(T.CENTERED_SUMS) == 1
    assert T.CUSTOM_GRADIENT not in kinds and T.SUM not in kinds  # no autodiff through the statistics


# -- batch normalization sweep: (id, axes of x by name, feature axis, eps) -------------------------------
BN_CASES = [
    ("features_by_batch", ("F", "N"), "F", 1e-5),
    ("batch_first", ("N", "F"), "F", 1e-3),
    ("image_chwn", ("C", "H", "W", "N"), "C", 1e-5),
    ("image_nchw", ("N", "C", "H", "W"), "C", 1e-3),
    ("image_channels_last", ("H", "W", "N", "C"), "C", 0.1),
    ("volume", ("C", "D", "H", "W", "N"), "C", 1e-5),
    ("sequence", ("F", "REC", "N"), "F", 1e-5),
]
BN_LENGTHS = {"F": 5, "N": 4, "C": 3, "H": 4, "W": 3, "D": 2, "REC": 3}


def _bn_torch(x: Any, g: Any, b: Any, names: tuple, feature: str, eps: float, stats: tuple = ()) -> Any:
    """F.batch_norm on x permuted to (N, C, *rest) (PyTorch's feature axis is dim 1), permuted back."""
    order = ["N", feature] + [n for n in names if n not in ("N", feature)]
    perm = [names.index(n) for n in order]
    back = [order.index(n) for n in names]
    mean, var = stats if stats else (None, None)
    y = F.batch_norm(x.permute(*perm), mean, var, g, b, training=not stats, eps=eps)
    return y.permute(*back)


@pytest.mark.parametrize("names, feature, eps", [pytest.param(*c[1:], id=c[0]) for c in BN_CASES])
def test_batch_norm_training_vs_torch(names: tuple, feature: str, eps: float) -> None:
    """Training form: forward and the gradients of x, gamma and beta against torch's batch_norm."""
    axes = [ng.make_axis(BN_LENGTHS[n], n) for n in names]
    f = next(a for a in axes if a.name == feature)
    check_op_torch(lambda x, g, b: ng.batch_norm(x, g, b, eps=eps),
                   lambda x, g, b: _bn_torch(x, g, b, names, feature, eps),
                   [arg(*axes, low=-1.0, high=3.0), arg(f, positive=True), arg(f)])


@pytest.mark.parametrize("names, feature, eps", [pytest.param(*c[1:], id=c[0]) for c in BN_CASES[:4]])
def test_batch_norm_inference_forward_vs_torch(names: tuple, feature: str, eps: float) -> None:
    """Inference form: torch's batch_norm with running statistics (which it does not differentiate)."""
    axes = [ng.make_axis(BN_LENGTHS[n], n) for n in names]
    f = next(a for a in axes if a.name == feature)
    check_op_torch(lambda x, g, b, m, v: ng.batch_norm(x, g, b, eps=eps, mean=m, var=v),
                   lambda x, g, b, m, v: _bn_torch(x, g, b, names, feature, eps, (m, v)),
                   [arg(*axes), arg(f), arg(f), arg(f), arg(f, positive=True)], grad=False)


def test_batch_norm_training_float32_and_finite_differences() -> None:
    """The closed-form gradient against central finite differences (float64) and float32 runs."""
    x_axes = image(3, (4, 3))
    check_op(lambda x, g, b: ng.relu(ng.batch_norm(x, g, b, eps=1e-3)),
             lambda x, g, b: np.maximum(nn_ref.batch_norm(x, g, b, 1e-3, axis=0), 0),
             [arg(*x_axes, avoid=0.05), arg(x_axes[0], positive=True), arg(x_axes[0])],
             covers=[T.MOMENTS], atol=1e-4, rtol=1e-4)
