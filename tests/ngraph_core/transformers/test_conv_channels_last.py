"""Convolutions of few output positions computed channels last (``numpy/conv_channels_last.py``) and the
compiled loop they multiply with (``narrow_gemm.compiled``, ``times_transposed``).

The forward kernel (``NG_CONV=channels_last``) is checked against the im2col kernel and PyTorch in float64
on seeded random geometries (1-3 spatial axes, odd sizes, strides, dilation, asymmetric padding, batch first
or last, one and two workers), in float32 on batch-1 ResNet layers, with the filter's rows split over two
workers, and with constant and in-place-updated variable filters; the measured choice offers it.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
torch = pytest.importorskip("torch")

from test_conv_image import assert_matches_im2col_and_torch, build, geometry, run  # noqa: E402  (its helpers)

import ngraph_core as ng  # noqa: E402
from ngraph_core.ir.conv import ConvArg  # noqa: E402
from ngraph_core.transformers.kernels.conv import live_taps  # noqa: E402
from ngraph_core.transformers.numpy import (  # noqa: E402
    conv_channels_last,  # noqa: E402
    conv_choice,
    narrow_gemm,
    runtime,
)


@pytest.fixture(autouse=True)
def private_choices(tmp_path, monkeypatch):
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path / "ng-cache"))
    monkeypatch.delenv("NG_KERNELS", raising=False)
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)


def layer_axes(c: int, size: int, n: int, k: int, fshape: int = 3) -> tuple[list, list]:
    """The axes ``[C, H, W, N]`` of a ``size`` x ``size`` activation and ``[C, R, S, K]`` of its filter."""
    C, N, K = ng.make_axis(c, "C"), ng.make_axis(n, "N"), ng.make_axis(k, "K")
    return ([C, ng.make_axis(size, "H"), ng.make_axis(size, "W"), N],
            [C, ng.make_axis(fshape, "R"), ng.make_axis(fshape, "S"), K])


def random_layer(monkeypatch, mode: str, seed: int, c: int, size: int, n: int, k: int):
    """``NG_CONV=mode`` on one thread, and a seeded 3x3 layer: (x axes, filter axes, filter, input values)."""
    monkeypatch.setenv("NG_CONV", mode)
    monkeypatch.setenv("NG_THREADS", "1")
    rng = np.random.default_rng(seed)
    x_axes, w_axes = layer_axes(c, size, n, k)
    return (x_axes, w_axes, rng.standard_normal((c, 3, 3, k)).astype(np.float32),
            rng.standard_normal((c, size, size, n)).astype(np.float32))


def spy_made(monkeypatch) -> list[tuple[int, ...]]:
    """Records the input shape of every channels-last kernel made."""
    made: list[tuple[int, ...]] = []
    real = conv_channels_last.conv_into
    monkeypatch.setattr(conv_channels_last, "conv_into",
                        lambda x, *a, **k: made.append(x.axes.lengths) or real(x, *a, **k))
    return made


@pytest.mark.parametrize("seed", range(16))
def test_random_geometries_match_im2col_and_torch(monkeypatch, seed):
    g = {**geometry(seed), "groups": 1, "n": 1 + seed % 3}
    g["c"], g["k"] = 1 + seed % 5, 1 + (seed * 7) % 9  # output channels not a multiple of four too
    results, dy, (x, w, dyv) = build(g, seed)
    made = spy_made(monkeypatch)
    ours, _ = run(monkeypatch, "channels_last", results, dy, dyv, threads=1 + seed % 2)
    arg = ConvArg(g["strides"], g["padding"], g["dilation"], 1)
    x_axes = results[0].src[0].axes
    if live_taps(g["lengths"], g["fshape"], arg) is None and \
            conv_channels_last.applies(x_axes, results[0].src[1].axes, arg, "float64", np):
        assert made, g
    assert_matches_im2col_and_torch(monkeypatch, g, ours, results, dy, (x, w, dyv))


@pytest.mark.parametrize("c,k,size,stride,fshape,threads", [
    (64, 64, 8, 1, 3, 1),      # a ResNet-18 stage-1 layer at batch 1: 64 columns
    (128, 256, 4, 2, 3, 1),    # a stride-2 stage entry: 4 columns
    (64, 128, 8, 2, 1, 1),     # a 1x1 stride-2 shortcut (depth 64: BLAS)
    (3, 64, 32, 2, 7, 1),      # the stem: 3 channels, 7x7 stride 2 (runs of S * C = 21 floats; depth 147: BLAS)
    (512, 512, 3, 1, 3, 2),    # 21M multiply-adds: the loop on numba's two threads (or two workers)
    (40, 10, 5, 1, 3, 2),      # 10 filter rows (a last block of two), 25 columns (a last block of one); 0.9M
                               # multiply-adds: on numba's threads
    (256, 8, 16, 2, 3, 1),     # a 331 KB padded copy: shared scratch, its borders written every call
])
def test_batch1_layers_in_float32_against_torch(monkeypatch, c, k, size, stride, fshape, threads):
    rng = np.random.default_rng(c + k)
    x_axes, w_axes = layer_axes(c, size, 1, k, fshape)
    xv = rng.standard_normal((c, size, size, 1)).astype(np.float32)
    g = rng.normal(0, 1 / np.sqrt(c * fshape * fshape), (c, fshape, fshape, k)).astype(np.float32)
    x = ng.placeholder(x_axes)
    y = ng.convolution(x, ng.constant(g, w_axes), strides=stride, padding=fshape // 2)
    made = spy_made(monkeypatch)
    monkeypatch.setenv("NG_CONV", "channels_last")
    monkeypatch.setenv("NG_THREADS", str(threads))
    splits: list[tuple[int, bool]] = []
    real = narrow_gemm.compiled

    def spying(dtype, epilogue=(), parallel=False):
        gemm = real(dtype, epilogue, parallel)
        return lambda a, bt, out, *rest: splits.append((a.shape[0], parallel)) or gemm(a, bt, out, *rest)

    monkeypatch.setattr(narrow_gemm, "compiled", spying)
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
        f(xv + 100.0)  # a first call with other values: nothing of it may stay (borders, scratch)
        got = f(xv)
    want = torch.nn.functional.conv2d(torch.tensor(np.moveaxis(xv, -1, 0)), torch.tensor(np.moveaxis(g, -1, 0)),
                                      stride=stride, padding=fshape // 2).numpy()
    assert made == [(c, size, size, 1)]
    np.testing.assert_allclose(got, np.moveaxis(want, 0, -1), rtol=1e-4, atol=1e-4)
    splits = splits[len(splits) // 2:]  # the second call's
    depth = c * fshape * fshape
    macs = k * depth * got.shape[1] * got.shape[2]
    team = threads == 2 and macs >= conv_channels_last.PARALLEL_LOOP_MACS and narrow_gemm.threadsafe_layer()
    workers = threads == 2 and macs >= runtime.MIN_PARALLEL_FLOPS and not team
    assert splits == ([] if depth < conv_channels_last.MIN_LOOP_DEPTH else [(k, True)] if team else
                      [(k // 2, False), (k // 2, False)] if workers else [(k, False)])


def test_variable_filters_are_read_every_call(monkeypatch):
    """A constant filter is reordered once and kept; a variable one changes in place (an optimizer's update)
    and is reordered on every call: the second call must see the new values."""
    x_axes, w_axes, g, xv = random_layer(monkeypatch, "channels_last", 3, 16, 4, 2, 8)
    w = ng.variable(w_axes, initial_value=g)
    x = ng.placeholder(x_axes)
    y = ng.convolution(x, w, padding=1)
    update = ng.assign(w, w * 2.0)

    def reference(filters):
        out = torch.nn.functional.conv2d(torch.tensor(np.moveaxis(xv, -1, 0)),
                                         torch.tensor(np.moveaxis(filters, -1, 0)), padding=1).numpy()
        return np.moveaxis(out, 0, -1)

    with ng.transformers.make_transformer() as t:
        forward, step = t.computation(y, x), t.computation(update)
        np.testing.assert_allclose(forward(xv), reference(g), rtol=1e-4, atol=1e-4)
        step()
        np.testing.assert_allclose(forward(xv), reference(2 * g), rtol=1e-4, atol=1e-4)


def test_where_it_applies():
    def applies(c=8, size=4, n=1, groups=1, dtype="float32", xp=np):
        x_axes, w_axes = layer_axes(c, size, n, 8)
        x = ng.make_axes(x_axes)
        w = ng.make_axes([ng.make_axis(c // groups, "Ci"), *w_axes[1:]])
        return conv_channels_last.applies(x, w, ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1), groups), dtype, xp)

    assert applies()
    assert applies(size=16, n=1) and not applies(size=16, n=2)  # 256 columns, then 512 (BLAS's packed kernel)
    assert applies(size=1)  # one column: the loop streams the filter faster than BLAS's GEMV
    assert not applies(groups=2)
    assert not applies(dtype="float16")


def test_the_reference_kernel_set_has_no_channels_last(monkeypatch):
    monkeypatch.setenv("NG_KERNELS", "numpy")
    assert not narrow_gemm.available("float32")
    monkeypatch.setenv("NG_KERNELS", "auto")
    assert narrow_gemm.available("float32") and narrow_gemm.available("float64")
    assert not narrow_gemm.available("int32")


def test_the_choice_measures_it_at_batch_one(monkeypatch):
    """Under ``NG_CONV=auto`` a batch-1 8x8 layer's record holds all three of its candidates (the filter is a
    variable: Winograd applies), and whichever is chosen gives the reference."""
    x_axes, w_axes, g, xv = random_layer(monkeypatch, "auto", 5, 32, 8, 1, 32)
    x = ng.placeholder(x_axes)
    with ng.transformers.make_transformer() as t:
        step = t.computation(ng.convolution(x, ng.variable(w_axes, initial_value=g), padding=1), x)
        for _ in range(conv_choice.CALLS_TO_DECIDE):  # one candidate timed a call
            got = step(xv)
    (entry,) = conv_choice.MEASURED.values()
    assert set(entry["ms"]) == {"im2col", "winograd", "channels_last"}
    assert entry["chosen"] in entry["ms"]
    want = torch.nn.functional.conv2d(torch.tensor(np.moveaxis(xv, -1, 0)), torch.tensor(np.moveaxis(g, -1, 0)),
                                      padding=1).numpy()
    np.testing.assert_allclose(got, np.moveaxis(want, 0, -1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows,depth,cols", [(64, 576, 64), (10, 147, 17), (1, 5, 2), (4, 3000, 4), (9, 33, 1)])
def test_times_transposed_against_numpy(dtype, rows, depth, cols):
    """Every remainder of the four-by-four blocks (rows and columns), one column, and a strided ``out``."""
    rng = np.random.default_rng(rows + cols)
    a = rng.standard_normal((rows, depth)).astype(dtype)
    bt = rng.standard_normal((cols, depth)).astype(dtype)
    wide = np.full((rows, cols + 3), np.nan, dtype=dtype)
    out = wide[:, 1:cols + 1]
    narrow_gemm.times_transposed(a, bt, out)
    tolerance = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, a @ bt.T, rtol=tolerance, atol=tolerance * np.sqrt(depth))
    assert np.isnan(wide[:, 0]).all() and np.isnan(wide[:, cols + 1:]).all()  # nothing written outside


@pytest.mark.parametrize("size,stride,mode", [(1, 1, "auto"), (2, 2, "auto"), (2, 2, "channels_last"),
                                               (2, 2, "im2col")])
def test_filters_cut_to_their_live_taps(monkeypatch, size, stride, mode):
    """A 3x3 pad-1 layer of a 1x1 map (one live tap) and a stride-2 one of a 2x2 map (four: one output)
    at batch 1: one column; the cut layers run channels last unless ``NG_CONV=im2col``."""
    x_axes, w_axes, g, xv = random_layer(monkeypatch, mode, size, 32, size, 1, 24)
    x = ng.placeholder(x_axes)
    made = spy_made(monkeypatch)
    with ng.transformers.make_transformer() as t:
        got = t.computation(ng.convolution(x, ng.constant(g, w_axes), strides=stride, padding=1), x)(xv)
    want = torch.nn.functional.conv2d(torch.tensor(np.moveaxis(xv, -1, 0)), torch.tensor(np.moveaxis(g, -1, 0)),
                                      stride=stride, padding=1).numpy()
    np.testing.assert_allclose(got, np.moveaxis(want, 0, -1), rtol=1e-4, atol=1e-4)
    assert made == ([] if mode == "im2col" else [(32, size, size, 1)])


def residual_block(c: int, k: int, size: int, seed: int, order: str = "bias-first"):
    """``relu(conv(x, w) + b + r)`` (or ``+ r + b``) at batch 1, ``r`` a second input: (y, x, r, feeds)."""
    rng = np.random.default_rng(seed)
    x_axes, w_axes = layer_axes(c, size, 1, k)
    x = ng.placeholder(x_axes)
    w = ng.constant(rng.normal(0, 1 / np.sqrt(9 * c), (c, 3, 3, k)).astype(np.float32), w_axes)
    h = ng.convolution(x, w, padding=1)
    b = ng.constant(rng.standard_normal(k).astype(np.float32), [h.axes[0]])
    r = ng.placeholder(h.axes)
    y = ng.relu((h + b) + r) if order == "bias-first" else ng.relu((h + r) + b)
    feeds = (rng.standard_normal((c, size, size, 1)).astype(np.float32),
             rng.standard_normal((k, size, size, 1)).astype(np.float32))
    return y, x, r, feeds


def test_epilogue_steps_are_read_from_the_program():
    from ngraph_core.passes.fusion import fuse_elementwise
    from ngraph_core.transformers.kernels.fused import epilogue_steps

    y, *_ = residual_block(8, 8, 4, 0)
    (fused,) = fuse_elementwise([y])
    assert epilogue_steps(fused) == (("bias", 0), ("add", 1), ("relu", None))
    y, *_ = residual_block(8, 8, 4, 0, order="residual-first")
    (fused,) = fuse_elementwise([y])
    assert [step for step, _ in epilogue_steps(fused)] == ["add", "bias", "relu"]
    h = y.src[0].src[0].src[0]  # the conv
    for other in (ng.relu(h * 2.0), ng.relu(h + h), ng.relu(ng.relu(h) + 1.0), ng.tanh(h + 1.0)):
        (fused,) = fuse_elementwise([other])
        assert fused.arg.head != "conv" or epilogue_steps(fused) is None, repr(fused.arg)


@pytest.mark.parametrize("mode", ["channels_last", "auto", "im2col"])
@pytest.mark.parametrize("order", ["bias-first", "residual-first"])
def test_a_fused_conv_bias_residual_relu(monkeypatch, mode, order):
    """The epilogue applied as the loop stores each sum rounds as the separate ufuncs do: channels last, the
    fused computation equals the unfused one bit for bit; every mode matches it."""
    monkeypatch.setenv("NG_CONV", mode)
    monkeypatch.setenv("NG_THREADS", "1")
    y, x, r, (xv, rv) = residual_block(32, 24, 4, 1, order)
    runs = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(optimize=optimize) as t:
            f = t.computation(y, x, r)
            if optimize:
                assert [op.arg.head for op in f.graph.order if op.op.value == "fused"] == ["conv"]
            f(xv + 1.0, rv)  # a call with other values first
            runs.append(f(xv, rv))
    if mode == "channels_last":
        np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-5, atol=1e-5)
    assert (runs[0] >= 0).all() and (runs[0] == 0).any()


@pytest.mark.parametrize("c,k,size,threads", [(512, 512, 3, 2), (8, 12, 5, 1), (3, 16, 16, 1)])
def test_the_epilogue_split_over_workers_and_on_blas(monkeypatch, c, k, size, threads):
    """A layer big enough to split the filter's rows over two workers (each gets its rows of the bias and the
    residual); a shallow one (depth 72: BLAS, then the program's steps); a shallow one with more columns than
    filter rows (256 against 16: computed transposed on BLAS, stored back transposed with the steps)."""
    monkeypatch.setenv("NG_CONV", "channels_last")
    monkeypatch.setenv("NG_THREADS", str(threads))
    y, x, r, (xv, rv) = residual_block(c, k, size, 2)
    runs = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(optimize=optimize) as t:
            runs.append(t.computation(y, x, r)(xv, rv))
    np.testing.assert_array_equal(runs[0], runs[1])


def test_numba_threads_give_the_one_thread_result(monkeypatch):
    """A 512-channel layer with its epilogue on numba's two threads (``narrow_gemm.parallel_loop``): each
    output element is computed by the same code whichever thread runs it, so bit for bit the one-thread
    result."""
    if not narrow_gemm.threadsafe_layer():
        pytest.skip("numba has no thread-safe threading layer here (no OpenMP, no tbb)")
    monkeypatch.setenv("NG_CONV", "channels_last")
    y, x, r, (xv, rv) = residual_block(512, 512, 3, 4)
    runs = []
    for threads in ("2", "1"):
        monkeypatch.setenv("NG_THREADS", threads)
        with ng.transformers.make_transformer() as t:
            runs.append(t.computation(y, x, r)(xv, rv))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert narrow_gemm.parallel_loop("float32", ("bias", "add", "relu"), 2) is not None
    assert narrow_gemm.parallel_loop("float32", (), 1) is None


def test_only_known_steps_and_float_dtypes_reach_a_generated_source():
    with pytest.raises(ValueError, match="epilogue steps"):
        narrow_gemm.compiled("float32", ("relu\nimport os",))
    with pytest.raises(ValueError, match="epilogue steps"):
        narrow_gemm.transposed_store("float32", ("tanh",))
    with pytest.raises(ValueError, match="dtype"):
        narrow_gemm.compiled("int32")
