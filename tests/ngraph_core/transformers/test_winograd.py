"""Winograd F(2x2, 3x3) convolutions (``transformers/numpy/winograd.py``) against the im2col kernels and
PyTorch: forward, data and filter gradients on odd sizes, asymmetric padding, other axes orders,
float32 and float64; fused conv heads; the per-layer measured choice and its on-disk record; the
disk cache of the compiled transforms; fallbacks and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from disk_cache import run_twice

import ngraph_core as ng
from ngraph_core.ir.conv import ConvArg
from ngraph_core.transformers.numpy import conv_choice, winograd

pytest.importorskip("numba")
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Compiled transforms shared by the module's tests; choices recorded in a fresh place per test."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ng-cache"))
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)


def conv_graph(c: int, hw: tuple[int, int], k: int, n: int, padding: Any, batch_first: bool = False,
               seed: int = 0) -> tuple[list, list, list]:
    """A convolution with its data and filter gradients for a fed output gradient:
    (results, [dy placeholder], [x value, w value, dy value]) with ``x`` ``[C, H, W, N]`` (or ``[N, C, H, W]``)."""
    rng = np.random.default_rng(seed)
    C, H, W, N = ng.make_axis(c, "C"), ng.make_axis(hw[0], "H"), ng.make_axis(hw[1], "W"), ng.make_axis(n, "N")
    x_axes = [N, C, H, W] if batch_first else [C, H, W, N]
    # float32-exact values: variables hold float32 initial values, even on a float64 transformer
    x_value = rng.standard_normal(tuple(a.length for a in x_axes)).astype(np.float32).astype(np.float64)
    w_value = rng.normal(0, 0.3, (c, 3, 3, k)).astype(np.float32).astype(np.float64)
    x = ng.variable(x_axes, initial_value=x_value)
    w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(k, "K")], initial_value=w_value)
    y = ng.convolution(x, w, padding=padding)
    dy = ng.placeholder(y.axes)
    dy_value = rng.standard_normal(y.axes.lengths)
    return [y, *ng.gradients(y, [x, w], error=dy)], [dy], [x_value, w_value, dy_value]


def run(monkeypatch, mode: str, results: list, feeds: list, dy_value: np.ndarray, dtype: str) -> list[np.ndarray]:
    monkeypatch.setenv("NG_CONV", mode)
    with ng.transformers.make_transformer(float_dtype=dtype) as t:
        return [np.asarray(v) for v in t.computation(results, *feeds)(dy_value.astype(dtype))]


def torch_reference(x: np.ndarray, w: np.ndarray, dy: np.ndarray, padding: Any, batch_first: bool) -> list:
    """y, dx, dw from PyTorch in float64 (our layouts in and out)."""
    (top, bottom), (left, right) = ((padding, padding), (padding, padding)) if isinstance(padding, int) else padding
    xt = torch.tensor(x if batch_first else x.transpose(3, 0, 1, 2), requires_grad=True)
    wt = torch.tensor(w.transpose(3, 0, 1, 2), requires_grad=True)  # (K, C, 3, 3)
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, (left, right, top, bottom)), wt)
    y.backward(torch.tensor(dy.transpose(3, 0, 1, 2)))
    dx = xt.grad.numpy()
    return [y.detach().numpy().transpose(1, 2, 3, 0), dx if batch_first else dx.transpose(1, 2, 3, 0),
            wt.grad.numpy().transpose(1, 2, 3, 0)]


CASES = [  # (C, (H, W), K, N, padding, batch_first)
    (3, (8, 8), 4, 5, 1, False),
    (4, (7, 9), 5, 3, 1, False),  # odd output lengths: the last tile row and column are cut
    (5, (6, 5), 3, 2, 0, False),  # valid convolution: the data gradient pads by 2
    (2, (5, 7), 3, 4, 2, False),  # wide padding: the data gradient needs none
    (3, (6, 7), 6, 3, ((0, 2), (1, 0)), False),  # asymmetric padding
    (4, (6, 6), 2, 3, 1, True),  # the batch axis first: inputs and gradients in another order
    (1, (3, 3), 1, 1, 1, False),  # one tile, one channel
    (6, (3, 4), 7, 2, 0, False),  # a 1x2 output: one tile, its second row cut
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_im2col_and_torch(monkeypatch, case, dtype):
    c, hw, k, n, padding, batch_first = case
    results, feeds, (x, w, dy) = conv_graph(c, hw, k, n, padding, batch_first)
    fast = run(monkeypatch, "winograd", results, feeds, dy, dtype)
    reference = run(monkeypatch, "im2col", results, feeds, dy, dtype)
    expected = torch_reference(x, w, dy, padding, batch_first)
    tolerance = 1e-10 if dtype == "float64" else 2e-5
    for name, ours, theirs, want in zip(("y", "dx", "dw"), fast, reference, expected):
        scale = np.abs(want).max()
        assert ours.shape == want.shape, name
        assert np.abs(ours - want).max() <= tolerance * scale, name
        assert np.abs(ours - theirs).max() <= tolerance * scale, name


def test_the_winograd_kernels_ran(monkeypatch):
    """NG_CONV=winograd builds all three kernels through this module (the test above is not im2col twice)."""
    made: list[str] = []
    for name in ("conv_into", "bprop_data", "bprop_filter"):
        real = getattr(winograd, name)
        monkeypatch.setattr(winograd, name, lambda *a, _real=real, _name=name: made.append(_name) or _real(*a))
    results, feeds, (_, _, dy) = conv_graph(3, (6, 6), 4, 2, 1)
    run(monkeypatch, "winograd", results, feeds, dy, "float64")
    assert sorted(made) == ["bprop_data", "bprop_filter", "conv_into"]
    made.clear()
    run(monkeypatch, "im2col", results, feeds, dy, "float64")
    assert made == []


@pytest.mark.parametrize("arg, fshape, dtype", [
    (ConvArg((2, 2), ((1, 1), (1, 1)), (1, 1)), (3, 3), "float32"),
    (ConvArg((1, 1), ((2, 2), (2, 2)), (2, 2)), (3, 3), "float32"),
    (ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1), 2), (3, 3), "float32"),
    (ConvArg((1, 1), ((2, 2), (2, 2)), (1, 1)), (5, 5), "float32"),
    (ConvArg((1, 1, 1), ((1, 1),) * 3, (1, 1, 1)), (3, 3, 3), "float32"),
    (ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1)), (3, 3), "int32"),
])
def test_what_is_not_eligible(arg, fshape, dtype):
    assert not winograd.eligible(fshape, arg, dtype)
    assert winograd.eligible((3, 3), ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1)), "float32")


def test_ineligible_convolutions_still_compute_with_winograd_asked(monkeypatch):
    """Stride 2 and a 5x5 filter run im2col under NG_CONV=winograd, with the same values."""
    rng = np.random.default_rng(3)
    C, H, W, N = ng.make_axis(3, "C"), ng.make_axis(9, "H"), ng.make_axis(9, "W"), ng.make_axis(2, "N")
    x = ng.placeholder([C, H, W, N])
    w5 = ng.variable([C, ng.make_axis(5, "R"), ng.make_axis(5, "S"), ng.make_axis(4, "K")],
                     initial_value=rng.standard_normal((3, 5, 5, 4)))
    w3 = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(4, "K")],
                     initial_value=rng.standard_normal((3, 3, 3, 4)))
    out = ng.sum(ng.convolution(x, w5, padding=2) ** 2) + ng.sum(ng.convolution(x, w3, strides=2, padding=1) ** 2)
    results = [out, *ng.gradients(out, [x, w5, w3])]
    value = rng.standard_normal((3, 9, 9, 2))
    got = {}
    for mode in ("winograd", "im2col"):
        monkeypatch.setenv("NG_CONV", mode)
        with ng.transformers.make_transformer(float_dtype="float64") as t:
            got[mode] = t.computation(results, x)(value)
    for a, b in zip(got["winograd"], got["im2col"]):
        np.testing.assert_array_equal(a, b)


def test_a_fused_conv_head_with_bias_and_relu(monkeypatch):
    """conv + bias + relu compiles to one fused op with a conv head; its head runs Winograd."""
    rng = np.random.default_rng(4)
    C, H, W, N, K = (ng.make_axis(n, s) for n, s in ((4, "C"), (10, "H"), (10, "W"), (3, "N"), (5, "K")))
    x = ng.placeholder([C, H, W, N])
    w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), K], initial_value=rng.standard_normal((4, 3, 3, 5)))
    b = ng.variable([K], initial_value=rng.standard_normal(5))
    y = ng.relu(ng.convolution(x, w, padding=1) + b)
    value = rng.standard_normal((4, 10, 10, 3)).astype("float32")
    made: list[int] = []
    real = winograd.conv_into
    monkeypatch.setattr(winograd, "conv_into", lambda *a: made.append(1) or real(*a))
    got = {}
    for mode in ("winograd", "im2col"):
        monkeypatch.setenv("NG_CONV", mode)
        with ng.transformers.make_transformer() as t:
            f = t.computation(y, x)
            got[mode] = f(value)
            ops = [op.op.name for op in f.graph.order]
        assert "FUSED" in ops and "CONV" not in ops
    assert made == [1]
    np.testing.assert_allclose(got["winograd"], got["im2col"], rtol=1e-5, atol=1e-5)


def test_the_transform_matrices():
    """Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A is the 3x3 correlation of a 4x4 tile (2x2 outputs)."""
    rng = np.random.default_rng(5)
    d, g = rng.standard_normal((4, 4)), rng.standard_normal((3, 3))
    bt, gm, at = (np.array(m, dtype=float) for m in (winograd.BT, winograd.G, winograd.AT))
    y = at @ ((gm @ g @ gm.T) * (bt @ d @ bt.T)) @ at.T
    direct = [[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(2)] for i in range(2)]
    np.testing.assert_allclose(y, direct, rtol=1e-12)


def test_filter_gradient_is_the_adjoint_of_the_filter_transform():
    """<transform(g), dU> == <g, gradient(dU)> for random g, dU."""
    rng = np.random.default_rng(6)
    g, du = rng.standard_normal((3, 3, 3, 4)), rng.standard_normal((16, 4, 3))
    u = winograd.filter_transform(g, np.empty((16, 4, 3)))
    dg = winograd.filter_gradient(du, np.empty((3, 3, 3, 4)))
    assert np.isclose(np.sum(u * du), np.sum(g * dg))


def test_generated_sources_are_plain_loops():
    for source in (winograd.input_source(), winograd.output_source(), winograd.gradient_source()):
        compile(source, "<winograd>", "exec")
        assert source.startswith("def k(") and "import" not in source


def test_auto_measures_once_and_records_the_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path))
    calls = {"slow": 0, "fast": 0}

    def slow(out, a):
        calls["slow"] += 1
        sum(range(20000))  # ~0.5 ms of work
        out[...] = a
        return out

    def fast(out, a):
        calls["fast"] += 1
        out[...] = a
        return out

    kernel = conv_choice.choose("key-1", {"im2col": slow, "winograd": fast})
    out = np.zeros(3)
    kernel(out, np.ones(3))
    assert calls == {"slow": 1, "fast": 0}  # one candidate a call, im2col first
    np.testing.assert_array_equal(out, 1.0)
    for i in range(2 * conv_choice.TIMED_CALLS - 1):
        kernel(out, np.full(3, float(i)))
        np.testing.assert_array_equal(out, float(i))  # every call's result, whichever candidate ran
    assert calls == {"slow": conv_choice.TIMED_CALLS, "fast": conv_choice.TIMED_CALLS}
    kernel(out, np.full(3, 2.0))
    assert calls["fast"] == conv_choice.TIMED_CALLS + 1 and calls["slow"] == conv_choice.TIMED_CALLS
    record = json.loads(conv_choice.choices_path().read_text())
    assert record["key-1"]["chosen"] == "winograd" and set(record["key-1"]["ms"]) == {"im2col", "winograd"}
    # a new process (simulated: the in-process record forgotten) reads the choice from disk, measuring nothing
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)
    assert conv_choice.choose("key-1", {"im2col": slow, "winograd": fast}) is fast


def test_a_near_tie_is_measured_again_by_later_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path))

    def slow(out, a):
        sum(range(20000))  # ~0.5 ms of work
        return out

    def fast(out, a):
        return out

    candidates = {"im2col": slow, "winograd": fast}
    tmp_path.joinpath("kernels").mkdir()
    conv_choice.choices_path().write_text(json.dumps({
        "tie": {"chosen": "im2col", "ms": {"im2col": 1.0, "winograd": 1.05}},  # within NEAR_TIE, one process
        "clear": {"chosen": "im2col", "ms": {"im2col": 1.0, "winograd": 2.0}},
        "done": {"chosen": "im2col", "ms": {"im2col": 1.0, "winograd": 1.05}, "runs": conv_choice.MEASURE_PROCESSES},
    }))
    assert conv_choice.choose("clear", candidates) is slow and conv_choice.choose("done", candidates) is slow
    remeasure = conv_choice.choose("tie", candidates)
    assert remeasure.__name__ == "measuring_kernel"
    for _ in range(2 * conv_choice.TIMED_CALLS):
        remeasure(np.zeros(1), np.zeros(1))
    entry = json.loads(conv_choice.choices_path().read_text())["tie"]
    # each algorithm keeps its best median over the processes: im2col's new ~0.5 ms, winograd's ~0
    assert entry["runs"] == 2 and entry["chosen"] == "winograd"
    assert entry["ms"]["im2col"] < 1.0 and entry["ms"]["winograd"] < entry["ms"]["im2col"]
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)
    assert conv_choice.choose("tie", candidates) is fast  # no longer a tie: settled


def test_a_corrupt_choice_record_is_measured_again(monkeypatch, tmp_path):
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path))
    conv_choice.choices_path().write_text('{"key-2": {"chosen": "nonsense"}, "trunc')
    chosen = conv_choice.choose("key-2", {"im2col": lambda out, a: out, "winograd": lambda out, a: out})
    assert chosen.__name__ == "measuring_kernel"
    for _ in range(2 * conv_choice.TIMED_CALLS):
        chosen(np.zeros(1), np.zeros(1))
    assert json.loads(conv_choice.choices_path().read_text())["key-2"]["chosen"] in conv_choice.ALGORITHMS


def test_the_layer_key_names_the_geometry_and_the_machine():
    key = conv_choice.layer_key("conv", [(16, 32, 32, 64), (16, 3, 3, 16)], ConvArg((1, 1), ((1, 1),) * 2, (1, 1)),
                             "float32")
    assert key.startswith("conv|16x32x32x64;16x3x3x16|pad=((1, 1), (1, 1))|float32|") and "cores=" in key


def test_modes_and_a_bad_value(monkeypatch):
    monkeypatch.delenv("NG_CONV", raising=False)
    monkeypatch.delenv("NG_KERNELS", raising=False)
    assert conv_choice.mode() == "auto"
    monkeypatch.setenv("NG_KERNELS", "numpy")
    monkeypatch.setenv("NG_CONV", "winograd")
    assert conv_choice.mode() == "im2col"  # the NumPy-only kernel set
    monkeypatch.setenv("NG_KERNELS", "numba")
    assert conv_choice.mode() == "winograd"
    monkeypatch.setenv("NG_CONV", "fft")
    with pytest.raises(ValueError, match="NG_CONV=.fft.*auto, im2col, winograd, image"):
        conv_choice.mode()


SCRIPT = textwrap.dedent("""
    import numpy as np
    import ngraph_core as ng
    C, H, W, N = (ng.make_axis(n, s) for n, s in ((2, "C"), (4, "H"), (4, "W"), (3, "N")))
    x = ng.placeholder([C, H, W, N])
    w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(2, "K")], initial_value=0.5)
    y = ng.sum(ng.convolution(x, w, padding=1) ** 2)
    with ng.transformers.make_transformer() as t:
        print(float(t.computation([y, ng.gradients(y, [w])[0]], x)(np.ones((2, 4, 4, 3), "float32"))[0]))
""")


def test_a_second_process_reuses_the_compiled_transforms(tmp_path):
    first, suffixes = run_twice(SCRIPT, {"NG_CONV": "winograd"}, tmp_path)
    assert suffixes.count(".nbc") == 3  # input, output and gradient transforms
    # 3x3 ones-filters over a ones image: y at a corner sums 4 taps, an edge 6, the middle 9 (x 2 channels x 0.5)
    per_image = 4 * 4.0 ** 2 + 8 * 6.0 ** 2 + 4 * 9.0 ** 2
    assert float(first) == pytest.approx(per_image * 3 * 2)


def test_the_nn_op_suite_passes_on_the_numpy_kernel_set():
    """The convolution, pooling and normalization op tests again with NG_KERNELS=numpy (im2col, no
    numba): the suite's default runs Winograd wherever eligible, so this keeps the reference set checked."""
    env = {**os.environ, "NG_KERNELS": "numpy", "NG_CONV": "im2col"}
    suite = Path(__file__).resolve().parents[1] / "test_nn_ops.py"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", str(suite)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
