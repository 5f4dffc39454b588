"""Every op test again on the other backends, compared with the NumPy transformer.

Parametrized over ``backend_helper.BACKENDS``: ``cupy_surface`` (CuPy 14.2's API on the CPU:
a NumPy-only call in a shared kernel fails here, without a GPU) and ``cupy`` (marked ``gpu``;
``pytest -m gpu`` runs these on a GPU machine, and they skip with the reason elsewhere).

* every case of ``test_ops.CASES``: float32 forward, float64 forward and float64 gradients;
* every case of ``test_ops.FUSED_CASES`` as a step of a fused program (the fusion pass);
* the nn ops in more configurations (``NN_CASES``: convolutions, deconvolution, pooling, CTC
  with lengths, a scan LSTM-style cell, gathers), and the random ops' shape and moments.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from backend_helper import BACKENDS, compare_backends
from op_helper import arg, make_inputs
from test_ops import BUG_RAISES, CASES, FUSED_CASES, Case

import ngraph_core as ng
from ngraph_core.passes.fusion import fuse_elementwise


def _case_params(cases: list[Case]) -> list[Any]:
    out = []
    for c in cases:
        marks = [pytest.mark.xfail(reason=c.xfail, raises=BUG_RAISES.get(c.xfail), strict=True)] if c.xfail else []
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("c", _case_params(CASES))
def test_op_on_backend(backend: str, c: Case) -> None:
    compare_backends(backend, c.build, c.inputs, atol=c.kw.get("atol", 1e-5), rtol=c.kw.get("rtol", 1e-5),
                     grad=c.kw.get("grad", True))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("c", _case_params(FUSED_CASES))
def test_fused_op_on_backend(backend: str, c: Case) -> None:
    """The case's op as an inner step of a ``fused`` program, on the backend, against NumPy's."""
    arrays = make_inputs(c.inputs)
    placeholders = [ng.placeholder(s.axes, dtype=s.dtype, name=f"in{i}") for i, s in enumerate(c.inputs)]
    (fused,) = fuse_elementwise([c.build(*placeholders) * 1.5 + 0.25])
    assert fused.op is ng.OpType.FUSED
    for float_dtype, tol in (("float32", 1e-5), ("float64", 1e-9)):
        feed = [a.astype(float_dtype) if s.dtype.startswith("float") else a for s, a in zip(c.inputs, arrays)]
        results = []
        for name in ("numpy", backend):
            with ng.transformers.make_transformer(name, float_dtype=float_dtype) as t:
                results.append(t.computation(fused, *placeholders)(*feed))
        want, got = results
        assert type(got) is np.ndarray and got.dtype == want.dtype == np.dtype(float_dtype)
        np.testing.assert_allclose(got, want, atol=tol, rtol=tol, err_msg=f"fused {float_dtype} on {backend}")


# -- nn ops in more configurations than CASES -------------------------------------------------------

N2, N3 = ng.make_axis(2, "N"), ng.make_axis(3, "N")
SPATIAL, FILTER = "DHW", "TRS"


def _image(c: int, lengths: tuple[int, ...]) -> list[ng.Axis]:
    return [ng.make_axis(c, "C"), *(ng.make_axis(n, s) for n, s in zip(lengths, SPATIAL[-len(lengths):])), N2]


def _filter(ci: int, fshape: tuple[int, ...], k: int, first: str = "Ci", last: str = "K") -> list[ng.Axis]:
    return [ng.make_axis(ci, first), *(ng.make_axis(n, s) for n, s in zip(fshape, FILTER[-len(fshape):])),
            ng.make_axis(k, last)]


def conv(c: int, k: int, lengths: tuple, fshape: tuple, **kw: Any) -> tuple:
    return (lambda x, w: ng.convolution(x, w, **kw),
            [arg(*_image(c, lengths)), arg(*_filter(c // kw.get("groups", 1), fshape, k))])


def deconv(c: int, co: int, lengths: tuple, fshape: tuple, **kw: Any) -> tuple:
    return (lambda x, w: ng.deconvolution(x, w, **kw),
            [arg(*_image(c, lengths)), arg(*_filter(co, fshape, c, first="Co", last="C"))])


def pool(op: str, lengths: tuple, **kw: Any) -> tuple:
    return (lambda x: ng.pooling(x, op=op, **kw), [arg(*_image(3, lengths))])


def ctc(blank: int) -> tuple:
    """CTC over logits [C=4, REC=6, N=3]: a repeat ("1 1"), a zero-length label, a short input."""
    ca, ta, la = ng.make_axis(4, "C"), ng.make_axis(6, "REC"), ng.make_axis(3, "L")
    labels = np.array([[1, 3, 2], [1, 2, 3], [2, 1, 3]]) % 4
    labels[labels == blank] = (blank + 1) % 4
    return (lambda x, y, il, ll: ng.ctc_loss(x, y, il, ll, blank=blank),
            [arg(ca, ta, N3), arg(la, N3, values=labels, dtype="int32"), arg(N3, values=[6, 4, 5], dtype="int32"),
             arg(N3, values=[3, 0, 2], dtype="int32")])


def lstm(reverse: bool, lengths: bool) -> tuple:
    """A scan over an LSTM-style cell (input, forget, output gates and cell candidate from one
    pre-activation), with optional valid lengths; returns the outputs plus the last state."""
    fa, ha, h2, ra = ng.make_axis(3, "F"), ng.make_axis(2, "H"), ng.make_axis(2, "H2"), ng.make_axis(4, "REC")

    def build(x: ng.Op, w: ng.Op, u: ng.Op, *lens: ng.Op) -> ng.Op:
        def step(x_t: ng.Op, h: ng.Op, c: ng.Op) -> tuple[list[ng.Op], list[ng.Op]]:
            a = ng.axes_with_order(ng.dot(w, x_t) + ng.dot(u, ng.cast_axes(h, [h2, N3])), h.axes)
            c_new = ng.sigmoid(a * 0.5 + 1.0) * c + ng.sigmoid(a) * ng.tanh(a * 1.5)
            h_new = ng.sigmoid(-a) * ng.tanh(c_new)
            return [h_new], [h_new, c_new]

        zeros = ng.constant(0.0, [ha, N3])
        (h, _), (ys,) = ng.scan(step, [x], [zeros, zeros], ra, reverse=reverse, lengths=lens[0] if lens else None)
        return ys + h

    inputs = [arg(fa, ra, N3), arg(ha, fa, low=-0.8, high=0.8), arg(ha, h2, low=-0.8, high=0.8)]
    return build, inputs + ([arg(N3, values=[4, 2, 3], dtype="int32")] if lengths else [])


def gather() -> tuple:
    va, ea, ia = ng.make_axis(7, "V"), ng.make_axis(3, "E"), ng.make_axis(5, "I")
    return (lambda table, ids: ng.gather(table, ids, va),
            [arg(va, ea), arg(ia, values=[0, 6, 2, 2, 4], dtype="int64")])


NN_CASES = {
    "conv1d_pad": conv(3, 4, (9,), (3,), padding=1),
    "conv1d_stride_dilation_groups": conv(4, 6, (11,), (3,), strides=2, dilation=2, groups=2),
    "conv2d_stride2_pad1": conv(3, 5, (8, 7), (3, 3), strides=2, padding=1),
    "conv2d_same_dilated": conv(4, 6, (9, 8), (3, 2), padding="same", dilation=(2, 3)),
    "conv2d_asymmetric_pad_stride": conv(3, 4, (7, 6), (3, 2), padding=((2, 1), (0, 3)), strides=(2, 3)),
    "conv2d_groups2": conv(4, 6, (6, 5), (3, 3), groups=2, padding=1),
    "conv2d_depthwise": conv(4, 4, (6, 5), (3, 3), groups=4, padding=1),
    "conv2d_fewer_out_channels": conv(6, 4, (7, 6), (3, 3), padding=1),
    "conv2d_pointwise_stride2": conv(5, 3, (7, 6), (1, 1), strides=2),
    "conv3d_strided_groups": conv(2, 4, (5, 6, 5), (2, 3, 2), strides=(2, 1, 2), padding=(0, 1, 1), groups=2),
    "deconv2d_stride2_pad1_out1": deconv(3, 2, (4, 3), (3, 3), strides=2, padding=1, output_padding=1),
    "deconv2d_groups2": deconv(4, 3, (4, 3), (3, 3), groups=2, strides=2, padding=1, output_padding=1),
    "deconv1d": deconv(3, 2, (5,), (4,), strides=2, padding=1),
    "max_pool_3x3_stride2_pad1": pool("max", (7, 8), fshape=3, strides=2, padding=1),
    "max_pool1d_ceil": pool("max", (8,), fshape=2, ceil_mode=True),
    "avg_pool_3x2_pad_ceil": pool("avg", (6, 5), fshape=(3, 2), strides=(2, 2), padding=(1, 1), ceil_mode=True),
    "avg_pool_exclude_pad": pool("avg", (7, 8), fshape=3, strides=2, padding=1, count_include_pad=False),
    "avg_pool3d": pool("avg", (4, 5, 4), fshape=2, strides=(2, 1, 2), padding=(1, 0, 1)),
    "ctc_blank0": ctc(0),
    "ctc_blank2": ctc(2),
    "lstm_scan": lstm(reverse=False, lengths=False),
    "lstm_scan_reverse_lengths": lstm(reverse=True, lengths=True),
    "gather": gather(),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(NN_CASES))
def test_nn_op_on_backend(backend: str, name: str) -> None:
    build, inputs = NN_CASES[name]
    compare_backends(backend, build, inputs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_random_op_on_backend(backend: str, kind: str) -> None:
    """Random ops draw the right shape, dtype and moments on the backend (streams differ from NumPy's on a GPU)."""
    A, B = ng.make_axis(200, "A"), ng.make_axis(100, "B")
    if kind == "uniform":
        r, mean, std = ng.uniform([A, B], low=-1.0, high=3.0, seed=11), 1.0, 4.0 / np.sqrt(12.0)
    else:
        r, mean, std = ng.normal([A, B], mean=0.5, std=2.0, seed=11), 0.5, 2.0
    with ng.transformers.make_transformer(backend) as t:
        f = t.computation(r)
        v, again = f(), f()
    assert type(v) is np.ndarray and v.dtype == np.float32 and v.shape == (200, 100)
    assert not np.array_equal(v, again), "a random op drew the same values twice"
    assert abs(v.mean() - mean) < 5 * std / np.sqrt(v.size)
    assert abs(v.std() - std) < 0.04 * std
    if kind == "uniform":
        assert v.min() >= -1.0 and v.max() < 3.0
