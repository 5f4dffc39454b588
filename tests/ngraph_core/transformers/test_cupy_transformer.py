"""The CuPy transformer: its error paths without a GPU (CuPy faked), ``backend="auto"``, and on a GPU
(``-m gpu``) the boundary behaviour: NumPy or device results, device feeds, generated fused kernels."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.transformers.cupy import elementwise as cuda_elementwise
from ngraph_core.transformers.cupy import load_cupy

C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")


def _fake_cupy(count: int | None = None, error: str | None = None) -> types.ModuleType:
    """A module named cupy whose device count is ``count`` or whose query raises ``error``."""

    def get_device_count() -> int:
        if error is not None:
            raise RuntimeError(error)
        return count

    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))
    return module


@pytest.mark.parametrize("fake, expected", [
    (None, "CuPy is not installed"),
    (_fake_cupy(error="cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"),
     "driver is too old"),
    (_fake_cupy(error="cudaErrorNoDevice: no CUDA-capable device is detected"), "no usable GPU"),
    (_fake_cupy(count=0), "sees no GPU"),
], ids=["no_cupy", "old_driver", "no_driver", "no_device"])
def test_load_cupy_names_the_cause(monkeypatch: pytest.MonkeyPatch, fake: types.ModuleType | None,
                                   expected: str) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake)  # None: ``import cupy`` raises ImportError
    with pytest.raises(ng.BackendUnavailableError, match=expected) as info:
        load_cupy()
    assert "make_transformer('numpy')" in str(info.value)  # the hint names the way out
    with pytest.raises(ng.BackendUnavailableError, match=expected):
        ng.transformers.make_transformer("cupy")  # asking for cupy never falls back


def test_auto_falls_back_to_numpy_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=0))
    with pytest.warns(RuntimeWarning, match="running on NumPy: cupy transformer: CuPy sees no GPU"):
        t = ng.transformers.make_transformer("auto", device_arrays=True, float_dtype="float64")
    with t:
        assert t.name == "numpy" and t.float_dtype == "float64"
        x = ng.placeholder([C, N])
        np.testing.assert_allclose(t.computation(ng.tanh(x) * 2.0, x)(np.ones((3, 4))), 2 * np.tanh(np.ones((3, 4))))


def test_neon_model_auto_backend_trains_on_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    from neon.activations import Softmax
    from neon.costs import CrossEntropyMulti
    from neon.data import ArrayIterator
    from neon.initializers import GlorotUniform
    from neon.layers import Affine
    from neon.model import Model
    from neon.optimizers import GradientDescentMomentum

    monkeypatch.setitem(sys.modules, "cupy", None)
    rng = np.random.default_rng(0)
    data = ArrayIterator(rng.standard_normal((32, 5)).astype("float32"), rng.integers(0, 3, 32), nclass=3,
                         batch_size=8)
    model = Model([Affine(3, GlorotUniform(seed=1), activation=Softmax())], backend="auto")
    with pytest.warns(RuntimeWarning, match="CuPy is not installed"):
        history = model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1), 4, progress=False)
    assert model.transformer.name == "numpy"
    losses = history["train_cost"]
    assert len(losses) == 4 and losses[-1] < losses[0]


def test_unknown_backend_lists_auto() -> None:
    with pytest.raises(ng.NgraphError, match="expected 'auto' or one of"):
        ng.transformers.make_transformer("tpu")


# -- on a GPU -----------------------------------------------------------------------------------------


def _graph() -> tuple[ng.Op, ng.Op, ng.Op, ng.Op]:
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([C], initial_value=np.array([0.5, -1.0, 2.0]), name="w")
    y = ng.sigmoid(ng.tanh(x * w + 1.0) * 3.0 - x)  # one fused program
    return x, w, y, ng.sum(y)


@pytest.mark.gpu
def test_results_are_numpy_by_default_and_device_arrays_on_request() -> None:
    import cupy

    x, w, y, total = _graph()
    xv = np.linspace(-2, 2, 12).reshape(3, 4).astype("float32")
    want = 1 / (1 + np.exp(-(np.tanh(xv * np.array([0.5, -1.0, 2.0])[:, None] + 1) * 3 - xv)))
    with ng.transformers.make_transformer("cupy") as t:
        f = t.computation([y, total], x)
        got, got_total = f(xv)
        assert type(got) is np.ndarray and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_total, want.sum(), rtol=1e-5)
        assert any(op.op is ng.OpType.FUSED for op in f.graph.order)
        assert any(src.operation.count("tanhf(") for src in cuda_elementwise._kernels)  # the generated kernel ran
        t.write_variable(w, cupy.asarray([1.0, 1.0, 1.0]))  # a device value is accepted as it is
        np.testing.assert_allclose(t.read_variable(w), [1.0, 1.0, 1.0])
    with ng.transformers.make_transformer("cupy", device_arrays=True) as t:
        got = t.computation(y, x)(cupy.asarray(xv))  # a device feed: no host copy
        assert isinstance(got, cupy.ndarray)
        np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-6)
        w_value = t.computation(w)()  # a variable is copied, never handed out
        assert isinstance(w_value, cupy.ndarray)
        w_value[...] = 7.0
        np.testing.assert_allclose(t.read_variable(w), [0.5, -1.0, 2.0])


@pytest.mark.gpu
def test_random_ops_are_seeded_and_state_is_refused() -> None:
    draw = ng.uniform([C, N], 0.0, 1.0)
    with ng.transformers.make_transformer("cupy", seed=3) as t1, \
            ng.transformers.make_transformer("cupy", seed=3) as t2:
        a, b = t1.computation(draw)(), t2.computation(draw)()
        np.testing.assert_array_equal(a, b)
        assert 0.0 <= a.min() and a.max() < 1.0 and len(np.unique(a)) == a.size
        with pytest.raises(ng.UnsupportedOpError, match="random_state"):
            t1.random_state()


@pytest.mark.gpu
@pytest.mark.parametrize("device_arrays", [False, True])
def test_cuda_graphs_replay_the_eager_results(device_arrays: bool) -> None:
    """A training step replayed as a CUDA graph gives the eager step's losses and weights, call after call;
    results are fresh arrays each call (a replay never overwrites what an earlier call returned)."""
    import cupy

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((3, 4)).astype("float32") for _ in range(5)]
    runs = []
    for graphs in (False, True):
        x = ng.placeholder([C, N], name="x")
        w = ng.variable([C], initial_value=np.array([0.5, -1.0, 2.0]), name="w")
        loss = ng.sum(ng.tanh(x * w + 1.0) ** 2.0)
        (g,) = ng.gradients(loss, [w])
        with ng.transformers.make_transformer("cupy", cuda_graphs=graphs, device_arrays=device_arrays) as t:
            step = t.computation([loss, ng.assign(w, w - g * 0.1)], x)
            outs = [step(xv)[0] for xv in xs]
            losses = [float(o.get() if isinstance(o, cupy.ndarray) else o) for o in outs]
            runs.append((losses, t.read_variable(w)))
            assert step._fn.captured is graphs if graphs else not hasattr(step._fn, "captured")
    (eager_losses, eager_w), (graph_losses, graph_w) = runs
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-6)
    assert len(set(graph_losses)) == len(xs)  # every call's own loss, not the last replay's
    np.testing.assert_allclose(graph_w, eager_w, rtol=1e-6)


@pytest.mark.gpu
def test_cuda_graphs_fall_back_where_a_kernel_reads_the_device() -> None:
    """CTC checks its labels on the host: the capture fails, the plan keeps running eagerly, correctly."""
    from test_ctc import random_batch

    b = random_batch(1, 12, 3, 5, 3, 0)
    ca, ta, na, la = (ng.make_axis(n, s) for n, s in ((5, "C"), (12, "REC"), (3, "N"), (3, "L")))
    x, y = ng.placeholder([ca, ta, na]), ng.placeholder([la, na], dtype="int32")
    il, ll = ng.placeholder([na], dtype="int32"), ng.placeholder([na], dtype="int32")
    loss = ng.ctc_loss(x, y, il, ll)
    feeds = (b["logits"].astype("float32"), b["labels"], b["il"], b["ll"])
    with ng.transformers.make_transformer() as t:
        want = t.computation(loss, x, y, il, ll)(*feeds)
    with ng.transformers.make_transformer("cupy", cuda_graphs=True) as t:
        f = t.computation(loss, x, y, il, ll)
        for _ in range(3):
            np.testing.assert_allclose(f(*feeds), want, rtol=1e-5)
        assert not f._fn.captured and f._fn.capture_error


@pytest.mark.gpu
def test_cuda_graphs_capture_gemms_and_convolutions() -> None:
    """A step with a dot and a convolution (GEMMs through ``cuda_gemm``'s handles) is captured, and its replays
    give the eager step's losses and weights."""
    runs = []
    for graphs in (False, True):
        rng = np.random.default_rng(0)
        ax = [ng.make_axis(n, s) for n, s in ((4, "C"), (8, "H"), (8, "W"), (16, "N"))]
        x = ng.placeholder(ax, name="x")
        w = ng.variable([ng.make_axis(4, "C"), ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(8, "K")],
                        initial_value=rng.standard_normal((4, 3, 3, 8)) / 6, name="w")
        y = ng.relu(ng.convolution(x, w, padding=1))
        v = ng.variable([ng.make_axis(5, "F"), ng.make_axis(8, "K")], initial_value=rng.standard_normal((5, 8)) / 3)
        loss = ng.sum(ng.tanh(ng.dot(v, ng.sum(y, reduction_axes=y.axes[1:3]))) ** 2.0)
        gw, gv = ng.gradients(loss, [w, v])
        with ng.transformers.make_transformer("cupy", cuda_graphs=graphs) as t:
            step = t.computation([loss, ng.doall([ng.assign(w, w - gw * 0.01), ng.assign(v, v - gv * 0.01)])], x)
            losses = [float(step(rng.standard_normal((4, 8, 8, 16)).astype("float32"))[0]) for _ in range(5)]
            runs.append((losses, t.read_variable(w), t.read_variable(v)))
            if graphs:
                assert step._fn.captured, step._fn.capture_error
                assert t.gemm is not None and t.gemm.fallbacks == 0
    for eager, replayed in zip(*runs):
        np.testing.assert_allclose(replayed, eager, rtol=1e-5)
