"""cuDNN convolutions (``cupy/cudnn.py``) rehearsed without a GPU.

The descriptors are pure functions, checked against numbers worked out by hand. The dispatch runs on the
CuPy-surface transformer with ``cuda_cudnn.variant`` as its ``conv_variant`` and a stand-in frontend
(``fake_cudnn.py``) that executes each cuDNN graph by reading memory through the dims and strides it was
given (a filter that is not packed read as packed ``KCRS``, as cuDNN 9.19 did on an H200): forward, data and
filter gradients must equal the NumPy transformer's for strides, padding (also asymmetric), dilation, groups,
1-D and 3-D, another axes order, batch 1 and a filter cut to its live taps.
Then the fallbacks: packed copies where only packed layouts have an engine, im2col (with its reason and one
warning) where nothing builds, and without a frontend or with ``NG_CUDNN=0``. ``-m gpu`` runs the real
thing (``benchmarks/gpu_cudnn_check.py``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from backend_helper import compare_backends
from cupy_surface import CupySurfaceTransformer
from fake_cudnn import FakeCudnn, is_packed
from op_helper import arg

import ngraph_core as ng
from ngraph_core.ir.conv import ConvArg
from ngraph_core.passes.pipeline import PIPELINES
from ngraph_core.transformers.cupy import cudnn as cuda_cudnn
from ngraph_core.transformers.kernels.context import KernelContext
from ngraph_core.transformers.kernels.conv import Epilogue
from ngraph_core.transformers.registry import register_transformer


class CudnnSurfaceTransformer(CupySurfaceTransformer):
    """The CuPy-surface checker with the CuPy transformer's convolution variant."""

    name = "cupy_surface_cudnn"
    conv_variant = staticmethod(cuda_cudnn.variant)


PIPELINES.setdefault(CudnnSurfaceTransformer.name, PIPELINES["cupy"])
register_transformer(CudnnSurfaceTransformer.name, CudnnSurfaceTransformer)
BACKEND = CudnnSurfaceTransformer.name


def _address(a: Any) -> int:
    return np.ndarray.view(a, np.ndarray).__array_interface__["data"][0]


def use_frontend(monkeypatch: pytest.MonkeyPatch, module: Any, stream: list[int] | None = None) -> None:
    """``module`` as the loaded frontend, host addresses as device pointers, fresh records."""
    loaded = [(cuda_cudnn.Frontend(module), None)] if module is not None else \
        [(None, "cannot import cudnn: ModuleNotFoundError: No module named 'cudnn'")]
    monkeypatch.setattr(cuda_cudnn, "_LOADED", loaded)
    monkeypatch.setattr(cuda_cudnn, "PLANS", {})
    monkeypatch.setattr(cuda_cudnn, "CHOSEN", {})
    monkeypatch.setattr(cuda_cudnn, "_WARNED", [])
    monkeypatch.setattr(cuda_cudnn, "pointer", _address)
    monkeypatch.setattr(cuda_cudnn, "current_stream", lambda xp: (stream or [7])[-1])
    monkeypatch.setattr(cuda_cudnn, "current_device", lambda xp: 0)
    monkeypatch.setenv("NG_CUDNN", "1")  # off by default until it passes on a GPU
    monkeypatch.setattr(cuda_cudnn, "FLOAT64", True)  # the fake computes float64 exactly: check those descriptors


# -- descriptors -------------------------------------------------------------------------------------------


def test_activation_chwn_is_described_in_place() -> None:
    # [C:16, H:32, W:32, N:128] float32, C-contiguous: cuDNN's [N, C, H, W] with the batch innermost
    order = cuda_cudnn.activation_order((0, 1, 2, 3))
    assert order == (3, 0, 1, 2)
    assert cuda_cudnn.describe((16, 32, 32, 128), (524288, 16384, 512, 4), 4, order) == \
        ((128, 16, 32, 32), (1, 131072, 4096, 128))


def test_batch_one_chwn_is_packed_nchw() -> None:
    x = np.empty((3, 4, 5, 1), np.float32)
    assert cuda_cudnn.describe(x.shape, x.strides, 4, (3, 0, 1, 2)) == ((1, 3, 4, 5), (60, 20, 5, 1))
    assert cuda_cudnn.describe(x.shape, x.strides, 4, (3, 0, 1, 2)) == cuda_cudnn.packed((1, 3, 4, 5))


def test_batch_first_axes_order() -> None:
    # axes [N:2, C:3, H:4, W:5]: roles (C, H, W, N) at positions (1, 2, 3, 0)
    x = np.empty((2, 3, 4, 5), np.float64)
    order = cuda_cudnn.activation_order((1, 2, 3, 0))
    assert order == (0, 1, 2, 3)
    assert cuda_cudnn.describe(x.shape, x.strides, 8, order) == ((2, 3, 4, 5), (60, 20, 5, 1))


def test_filter_crsk_as_kcrs() -> None:
    w = np.empty((3, 3, 3, 16), np.float32)  # [Ci, R, S, K]
    order = cuda_cudnn.filter_order(4)
    assert order == (3, 0, 1, 2)
    assert cuda_cudnn.describe(w.shape, w.strides, 4, order) == ((16, 3, 3, 3), (1, 144, 48, 16))


def test_one_dimensional_tensors_gain_a_unit_width() -> None:
    x = np.empty((3, 9, 2), np.float32)  # [C, W, N]
    assert cuda_cudnn.describe(x.shape, x.strides, 4, (2, 0, 1)) == ((2, 3, 9, 1), (1, 18, 2, 1))
    assert cuda_cudnn.geometry(ConvArg((2,), ((1, 0),), (3,))) == \
        {"pre_padding": [1, 0], "post_padding": [0, 0], "stride": [2, 1], "dilation": [3, 1]}


def test_undescribable_strides() -> None:
    x = np.empty((3, 4, 5, 2), np.float32)
    flipped = x[:, ::-1]
    assert cuda_cudnn.describe(flipped.shape, flipped.strides, 4, (3, 0, 1, 2)) is None
    broadcast = np.broadcast_to(np.empty((3, 1, 5, 2), np.float32), (3, 4, 5, 2))
    assert cuda_cudnn.describe(broadcast.shape, broadcast.strides, 4, (3, 0, 1, 2)) is None


def test_filter_layout_packs_all_but_kcrs_and_krsc() -> None:
    w = np.empty((3, 3, 3, 16), np.float32)  # [Ci, R, S, K]: K innermost, which cuDNN does not read
    crsk = cuda_cudnn.describe(w.shape, w.strides, 4, cuda_cudnn.filter_order(4))
    assert cuda_cudnn.filter_layout(crsk) == (((16, 3, 3, 3), (27, 9, 3, 1)), True)
    kcrs, krsc = cuda_cudnn.packed((16, 3, 3, 3)), cuda_cudnn.packed((16, 3, 3, 3), (0, 2, 3, 1))
    assert cuda_cudnn.filter_layout(kcrs) == (kcrs, False) and cuda_cudnn.filter_layout(krsc) == (krsc, False)
    one = cuda_cudnn.describe((3, 3, 3, 1), (36, 12, 4, 4), 4, cuda_cudnn.filter_order(4))  # K = 1: packed KCRS
    assert cuda_cudnn.filter_layout(one) == (one, False)


def test_packed_and_geometry() -> None:
    assert cuda_cudnn.packed((2, 3, 4, 5)) == ((2, 3, 4, 5), (60, 20, 5, 1))
    assert cuda_cudnn.packed((2, 3, 4, 5), cuda_cudnn.memory_order("nhwc", 4)) == ((2, 3, 4, 5), (60, 1, 15, 3))
    assert cuda_cudnn.memory_order("nchw", 5) == (0, 1, 2, 3, 4) and cuda_cudnn.memory_order("nhwc", 5) == \
        (0, 2, 3, 4, 1)
    assert cuda_cudnn.packed((2, 3, 4, 5, 6)) == ((2, 3, 4, 5, 6), (360, 120, 30, 6, 1))
    assert cuda_cudnn.geometry(ConvArg((2, 3), ((2, 1), (0, 3)), (1, 2))) == \
        {"pre_padding": [2, 0], "post_padding": [1, 3], "stride": [2, 3], "dilation": [1, 2]}


# -- dispatch through the stand-in frontend ----------------------------------------------------------------


def _image(c: int, lengths: tuple[int, ...], n: int, batch_first: bool = False) -> list[ng.Axis]:
    names = "DHW"[-len(lengths):] if len(lengths) > 1 else "W"
    axes = [ng.make_axis(c, "C"), *(ng.make_axis(k, s) for k, s in zip(lengths, names))]
    batch = ng.make_axis(n, "N")
    return [batch, *axes] if batch_first else [*axes, batch]


def conv_case(c: int, k: int, lengths: tuple, fshape: tuple, n: int = 2, batch_first: bool = False,
              **kw: Any) -> tuple:
    groups = kw.get("groups", 1)
    w = [ng.make_axis(c // groups, "Ci"), *(ng.make_axis(f, s) for f, s in zip(fshape, "TRS"[-len(fshape):])),
         ng.make_axis(k, "K")]
    return (lambda x, f: ng.convolution(x, f, **kw), [arg(*_image(c, lengths, n, batch_first)), arg(*w)])


CASES = {
    "3x3_pad1": conv_case(3, 4, (6, 5), (3, 3), padding=1),
    "3x3_stride2": conv_case(3, 4, (7, 6), (3, 3), strides=2, padding=1),
    "1x1": conv_case(5, 3, (5, 4), (1, 1)),
    "7x7_stride2_pad3": conv_case(2, 3, (9, 9), (7, 7), strides=2, padding=3),
    "dilation2": conv_case(3, 2, (9, 8), (3, 3), padding=2, dilation=2),
    "groups2": conv_case(4, 6, (6, 5), (3, 3), padding=1, groups=2),
    "asymmetric": conv_case(3, 4, (7, 6), (3, 2), padding=((2, 1), (0, 3)), strides=(2, 3)),
    "conv1d": conv_case(3, 4, (9,), (3,), padding=1, strides=2),
    "conv3d": conv_case(2, 4, (4, 5, 4), (2, 3, 2), strides=(2, 1, 2), padding=(0, 1, 1)),
    "batch1": conv_case(3, 4, (6, 5), (3, 3), n=1, padding=1),
    "batch_first": conv_case(3, 4, (6, 5), (3, 3), batch_first=True, padding=1),
    "cut_taps": conv_case(4, 3, (1, 1), (3, 3), padding=1),  # a 3x3 pad-1 conv of a 1x1 map: a 1x1 one
}


@pytest.mark.parametrize("name", list(CASES))
def test_cudnn_kernels_equal_numpy(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    fake = FakeCudnn()
    use_frontend(monkeypatch, fake)
    build, specs = CASES[name]
    compare_backends(BACKEND, build, specs)
    assert {kind for kind, _ in fake.executed} == {"fprop", "dgrad", "wgrad"}
    assert cuda_cudnn.CHOSEN and all(v.startswith("cudnn strided") for v in cuda_cudnn.CHOSEN.values()), \
        cuda_cudnn.CHOSEN
    assert all(numerical in g.deselected for g in fake.graphs if g.io.value == "FLOAT"
               for numerical in (fake.numerical_note.TENSOR_CORE,))


def test_packed_copies_where_only_packed_layouts_build(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCudnn(accepts=is_packed)
    use_frontend(monkeypatch, fake)
    build, specs = CASES["3x3_stride2"]
    compare_backends(BACKEND, build, specs)
    chosen = cuda_cudnn.CHOSEN.values()
    assert chosen and all(v.startswith("cudnn nchw, copying ") and "(strided: NotSupported" in v
                          for v in chosen), chosen
    assert fake.executed


def test_batch_one_copies_only_the_filter_on_packed_only_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    # [C, H, W, N:1] is a packed NCHW tensor once its unit batch stride is canonical: only [Ci, R, S, K] is copied
    fake = FakeCudnn(accepts=is_packed)
    use_frontend(monkeypatch, fake)
    build, specs = CASES["batch1"]
    compare_backends(BACKEND, build, specs)
    chosen = {k.split()[0]: v for k, v in cuda_cudnn.CHOSEN.items()}
    assert chosen["fprop"].startswith("cudnn strided, copying w (filter packed)"), chosen
    assert chosen["dgrad"].startswith("cudnn strided, copying w (filter packed)"), chosen
    assert chosen["wgrad"].startswith("cudnn strided, copying dw (filter packed)"), chosen


def test_filters_reach_cudnn_packed_kcrs(monkeypatch: pytest.MonkeyPatch) -> None:
    # the H200 bug: [Ci, R, S, K] described as [K, Ci, R, S] by its strides was read as packed KCRS (wrong values)
    fake = FakeCudnn()
    use_frontend(monkeypatch, fake)
    build, specs = CASES["3x3_stride2"]
    compare_backends(BACKEND, build, specs)
    for g in fake.graphs:
        kind, a, b, _ = g.op
        weight = b if kind in ("fprop", "dgrad") else g.out
        assert weight.strides == list(cuda_cudnn.packed(tuple(weight.dims))[1]), (kind, weight.dims, weight.strides)
        assert a.strides[0] == 1  # the activations as they are: [C, H, W, N], batch innermost
    chosen = {k.split()[0]: v for k, v in cuda_cudnn.CHOSEN.items()}
    assert chosen == {"fprop": "cudnn strided, copying w (filter packed) [fake_engine]",
                      "dgrad": "cudnn strided, copying w (filter packed) [fake_engine]",
                      "wgrad": "cudnn strided, copying dw (filter packed) [fake_engine]"}, chosen


def test_fake_reads_a_strided_filter_as_packed_kcrs() -> None:
    """The stand-in does what cuDNN 9.19 did on the H200: a ``[K, C, R, S]`` filter with strides other than packed
    KCRS / KRSC is read as packed KCRS (``conv_stride_pad_dilation``'s wrong H200 values replay under this)."""
    import torch

    fake = FakeCudnn()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)  # NCHW
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)  # [Ci, R, S, K], K innermost
    y = np.zeros((2, 4, 5, 4), np.float32)
    graph = fake.pygraph(io_data_type=fake.data_type.FLOAT, intermediate_data_type=fake.data_type.FLOAT,
                         compute_data_type=fake.data_type.FLOAT, handle=fake.create_handle())
    xt = graph.tensor(name="X", dim=list(x.shape), stride=[s // 4 for s in x.strides], data_type=fake.data_type.FLOAT)
    wt = graph.tensor(name="W", dim=[4, 3, 3, 3], stride=[1, 36, 12, 4], data_type=fake.data_type.FLOAT)
    yt = graph.conv_fprop(image=xt, weight=wt, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    yt.set_output(True).set_dim(list(y.shape)).set_stride([s // 4 for s in y.strides])
    for step in (graph.validate, graph.build_operation_graph, graph.check_support, graph.build_plans):
        step()
    graph.execute({xt: x, wt: w, yt: y}, np.empty(256, np.uint8), handle=graph.handle)
    misread = torch.from_numpy(w.ravel().reshape(4, 3, 3, 3).copy())
    want = torch.nn.functional.conv2d(torch.from_numpy(x), misread, padding=1).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_fake_numbers_uids_at_build_and_checks_the_pack() -> None:
    """As frontend 1.24.1: ``get_uid()`` is 0 until ``build_operation_graph`` numbers the tensors from 1, and a
    uid of the graph missing from the pack fails; ``cuda_cudnn`` reads the uids after the build."""
    fake = FakeCudnn()
    graph = fake.pygraph(io_data_type=fake.data_type.FLOAT, intermediate_data_type=fake.data_type.FLOAT,
                         compute_data_type=fake.data_type.FLOAT, handle=fake.create_handle())
    x = graph.tensor(name="X", dim=[1, 1, 3, 3], stride=[9, 9, 3, 1], data_type=fake.data_type.FLOAT)
    w = graph.tensor(name="W", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=fake.data_type.FLOAT, uid=1)
    y = graph.conv_fprop(image=x, weight=w, pre_padding=[0, 0], post_padding=[0, 0], stride=[1, 1], dilation=[1, 1])
    y.set_output(True).set_dim([1, 1, 3, 3]).set_stride([9, 9, 3, 1])
    early = [t.get_uid() for t in (x, w, y)]
    for step in (graph.validate, graph.build_operation_graph, graph.check_support, graph.build_plans):
        step()
    assert early == [0, 1, 0] and [t.get_uid() for t in (x, w, y)] == [2, 1, 3]
    ones, two, out = np.ones((3, 3), np.float32), np.full(1, 2.0, np.float32), np.zeros((3, 3), np.float32)
    with pytest.raises(RuntimeError, match="Uid 2 does not exist in variant pack"):
        graph.execute(dict(zip(early, (_address(ones), _address(two), _address(out)))), 1, handle=graph.handle)
    graph.execute({x.get_uid(): _address(ones), w.get_uid(): _address(two), y.get_uid(): _address(out)}, 1,
                  handle=graph.handle)
    np.testing.assert_array_equal(out, np.full((3, 3), 2.0))


def is_channels_last(dims: list[int], strides: list[int]) -> bool:
    """Packed NHWC / KRSC only (dims of length 1 ignored)."""
    order = (0, *range(2, len(dims)), 1)
    return is_packed([dims[i] for i in order], [strides[i] for i in order])


def test_nhwc_copies_where_only_channels_last_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCudnn(accepts=is_channels_last)
    use_frontend(monkeypatch, fake)
    build, specs = CASES["groups2"]
    compare_backends(BACKEND, build, specs)
    chosen = cuda_cudnn.CHOSEN.values()
    assert chosen and all(v.startswith("cudnn nhwc, copying ") and "; nchw: NotSupported" in v for v in chosen), \
        chosen


def test_im2col_with_a_reason_where_no_plan_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCudnn(accepts=lambda dims, strides: False)
    use_frontend(monkeypatch, fake)
    build, specs = CASES["3x3_pad1"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compare_backends(BACKEND, build, specs)
    assert len([w for w in caught if "cuDNN convolution not used" in str(w.message)]) == 1
    chosen = list(cuda_cudnn.CHOSEN.values())
    assert chosen and all(v.startswith("im2col: strided: NotSupported") and "; nchw: NotSupported" in v
                          and "; nhwc: NotSupported" in v for v in chosen), chosen
    assert not fake.executed
    failed = len(cuda_cudnn.PLANS)
    compare_backends(BACKEND, build, specs, float64=False)
    assert len(cuda_cudnn.PLANS) == failed and fake.builds == 0  # a failed build is not retried
    assert "im2col: strided: NotSupported" in cuda_cudnn.report()


def test_im2col_without_a_frontend(monkeypatch: pytest.MonkeyPatch) -> None:
    use_frontend(monkeypatch, None)
    build, specs = CASES["dilation2"]
    with pytest.warns(RuntimeWarning, match="No module named 'cudnn'"):
        compare_backends(BACKEND, build, specs)
    assert all(v == "im2col: cannot import cudnn: ModuleNotFoundError: No module named 'cudnn'"
               for v in cuda_cudnn.CHOSEN.values())


def test_ng_cudnn_0_keeps_im2col(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCudnn()
    use_frontend(monkeypatch, fake)
    monkeypatch.setenv("NG_CUDNN", "0")
    build, specs = CASES["3x3_pad1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare_backends(BACKEND, build, specs, float64=False)
    off = "im2col: NG_CUDNN is not 1 (off by default)"
    assert not fake.executed and all(v == off for v in cuda_cudnn.CHOSEN.values())


def test_plans_run_on_the_current_stream_and_are_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, stream = FakeCudnn(), [5]
    use_frontend(monkeypatch, fake, stream)
    build, specs = CASES["3x3_pad1"]
    x, w = (ng.placeholder(s.axes, name=f"in{i}") for i, s in enumerate(specs))
    xs, ws = (np.ones(tuple(a.length for a in s.axes), np.float32) for s in specs)
    with ng.transformers.make_transformer(BACKEND) as t:
        f = t.computation(build(x, w), x, w)
        first = f(xs, ws)
        stream.append(9)
        np.testing.assert_array_equal(f(xs, ws), first)
        f(xs, ws)
    assert fake.handles == 1 and fake.builds == 1
    assert fake.streams == [(1001, 5), (1001, 9)]  # moved once per stream change, not per call
    assert [h for _, h in fake.executed] == [1001] * 3


def test_epilogue_runs_after_the_convolution(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    fake = FakeCudnn()
    use_frontend(monkeypatch, fake)
    build, specs = CASES["3x3_pad1"]
    x, w = (ng.placeholder(s.axes, name=f"in{i}") for i, s in enumerate(specs))
    conv_arg = build(x, w).arg
    kc = KernelContext(xp=np, dtype_of=lambda op: "float32", generator_for=lambda op: None)

    def finish(out: np.ndarray, bias: np.ndarray) -> None:
        out += bias[:, None, None, None]
        np.maximum(out, 0, out=out)

    def unused(*args: Any) -> None:
        raise AssertionError("the im2col fallback ran")

    epilogue = Epilogue((("bias", 0), ("relu", None)), finish)
    kernel = cuda_cudnn.variant("conv", unused, kc, x, w, conv_arg, "float32", epilogue=epilogue)
    rng = np.random.default_rng(0)
    xv, wv = (rng.standard_normal(tuple(a.length for a in s.axes)).astype(np.float32) for s in specs)
    bias = rng.standard_normal(4).astype(np.float32)
    out = np.empty((4, 6, 5, 2), np.float32)
    kernel(out, xv, wv, bias)
    want = torch.nn.functional.conv2d(torch.from_numpy(np.moveaxis(xv, -1, 0)),
                                      torch.from_numpy(np.moveaxis(wv, -1, 0)), padding=1)
    want = np.maximum(np.moveaxis(want.numpy(), 0, -1) + bias[:, None, None, None], 0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_float64_runs_on_im2col_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H200 every float64 plan wrote zeros: float64 layers take im2col, saying why."""
    fake = FakeCudnn()
    use_frontend(monkeypatch, fake)
    monkeypatch.setattr(cuda_cudnn, "FLOAT64", False)
    build, specs = CASES["batch1"]
    compare_backends(BACKEND, build, specs)
    reasons = [v for k, v in cuda_cudnn.CHOSEN.items() if "float64" in k]
    assert reasons and all(v.startswith("im2col: float64: cuDNN 9.19's plans gave zeros") for v in reasons)
    assert {kind for kind, _ in fake.executed} == {"fprop"}  # the float32 forward still runs on cuDNN
