"""The CUDA im2col kernel, checked without a GPU: ``nvcc`` builds its source with a host loop over the same
body, and its col matrix must equal the shared ``Im2col``'s exactly (it is a gather: no arithmetic to round)
for 1-3 spatial axes, strides, asymmetric padding, dilation and inputs in other axes orders. ``-m gpu`` runs
the convolutions through it (``tests/ngraph_core/test_backends.py``)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from nvcc_helper import build_library, needs_nvcc

import ngraph_core as ng
from ngraph_core.ir.conv import ConvArg
from ngraph_core.transformers.cupy import im2col as cuda_im2col
from ngraph_core.transformers.kernels.conv import Im2col

pytestmark = needs_nvcc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    return build_library(cuda_im2col.source(host=True), tmp_path_factory.mktemp("im2col"), "im2col")


CASES = [  # (C, spatial lengths, N, filter, strides, padding, dilation, axes order)
    (3, (7,), 2, (3,), (1,), ((1, 1),), (1,), "CWN"),
    (2, (9,), 3, (2,), (2,), ((0, 1),), (2,), "NCW"),
    (4, (6, 5), 2, (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), "CHWN"),
    (3, (8, 7), 2, (3, 2), (2, 1), ((1, 0), (2, 1)), (1, 2), "NHWC"),
    (2, (5, 6, 4), 2, (2, 3, 2), (1, 2, 1), ((0, 1), (1, 1), (1, 0)), (2, 1, 1), "CDHWN"),
    (1, (4, 4), 1, (1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1), "CHWN"),  # 1x1 with stride: still a gather
]


@pytest.mark.parametrize("case", CASES, ids=[c[-1] + str(i) for i, c in enumerate(CASES)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_host_body_equals_the_shared_im2col(library: ctypes.CDLL, case: tuple, dtype: str) -> None:
    c, lengths, n, fshape, strides, padding, dilation, order = case
    names = dict(zip("C" + "DHW"[3 - len(lengths):] + "N", (c, *lengths, n))) if len(lengths) > 1 else \
        {"C": c, "W": lengths[0], "N": n}
    axes = ng.make_axes([ng.make_axis(names[k], k) for k in order])
    x = np.random.default_rng(len(order)).standard_normal(axes.lengths).astype(dtype)
    arg = ConvArg(strides, padding, dilation, 1)
    shared = Im2col(np, axes, fshape, arg, dtype, dtype)
    buffers = [np.empty(shape, dt) for shape, dt in shared.specs]
    windows = shared.windows(x, buffers)
    want = np.concatenate([shared.block(windows, block, buffers).copy() for block in shared.blocks], 1)
    ours = cuda_im2col.CudaIm2col(np, axes, fshape, arg, dtype)
    assert ours.out_lengths == shared.out_lengths and ours.rows == want.shape[0]
    geometry = cuda_im2col.geometry(x, ours.perm, fshape, arg, ours.out_lengths)
    col = np.full(want.shape, np.nan, dtype=dtype)
    fn = getattr(library, f"ng_im2col_host_{'f32' if dtype == 'float32' else 'f64'}")
    fn(x.ctypes.data_as(ctypes.c_void_p), col.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(col.size),
       geometry.ctypes.data_as(ctypes.c_void_p))
    np.testing.assert_array_equal(col, want)


def test_make_im2col_keeps_the_shared_one_where_no_gather_is_needed() -> None:
    axes = ng.make_axes([ng.make_axis(3, "C"), ng.make_axis(5, "H"), ng.make_axis(5, "W"), ng.make_axis(2, "N")])
    pointwise = ConvArg((1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    padded = ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    assert type(cuda_im2col.make_im2col(np, axes, (1, 1), pointwise, "float32", "float32")) is Im2col
    assert type(cuda_im2col.make_im2col(np, axes, (3, 3), padded, "float32", "float16")) is Im2col  # a converting copy
    assert type(cuda_im2col.make_im2col(np, axes, (3, 3), padded, "float32", "float32")) is cuda_im2col.CudaIm2col
