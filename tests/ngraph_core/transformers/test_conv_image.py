"""Convolutions computed one image at a time (``numpy/conv_image.py``) and the measured choice among the
layouts and algorithms (``transformers/numpy/conv_choice.py``).

The per-image forward kernel and filter gradient (``NG_CONV=image``) are checked against the im2col
kernels (``NG_CONV=im2col``) on seeded random geometries (1-3 spatial axes, odd sizes, strides, dilation,
asymmetric padding, groups, batch first or last, one and two workers) and against PyTorch in float64.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir.conv import ConvArg
from ngraph_core.transformers.kernels.conv import live_taps
from ngraph_core.transformers.numpy import conv_choice, conv_image

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def private_choices(tmp_path, monkeypatch):
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path / "ng-cache"))
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)


def geometry(seed: int) -> dict[str, Any]:
    """A random valid convolution: 1-3 spatial axes, odd lengths, strides, dilation, padding, groups."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    groups = int(rng.choice([1, 1, 2]))
    c, k = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
    fshape = tuple(int(v) for v in rng.integers(1, 4, size=rank))
    strides = tuple(int(v) for v in rng.integers(1, 3, size=rank))
    dilation = tuple(int(v) for v in rng.integers(1, 3, size=rank))
    padding = tuple((int(a), int(b)) for a, b in rng.integers(0, 3, size=(rank, 2)))
    lengths = tuple(max(d * (f - 1) + 1 - sum(p), 0) + int(rng.integers(1, 6 if rank < 3 else 4))
                    for f, d, p in zip(fshape, dilation, padding))
    return dict(c=c, k=k, n=int(rng.integers(2, 5)), lengths=lengths, fshape=fshape, strides=strides,
                dilation=dilation, padding=padding, groups=groups, batch_first=bool(rng.integers(0, 2)))


def build(g: dict[str, Any], seed: int = 0):
    """``y = conv(x, w)`` and its filter gradient for a fed ``dy``: (results, feeds, values)."""
    rng = np.random.default_rng(seed)
    spatial = [ng.make_axis(n, f"S{i}") for i, n in enumerate(g["lengths"])]
    C, N = ng.make_axis(g["c"], "C"), ng.make_axis(g["n"], "N")
    x_axes = [N, C, *spatial] if g["batch_first"] else [C, *spatial, N]
    x_value = rng.standard_normal([a.length for a in x_axes]).astype(np.float32).astype(np.float64)
    w_axes = [ng.make_axis(g["c"] // g["groups"], "Ci"), *(ng.make_axis(f, f"F{i}") for i, f in enumerate(g["fshape"])),
              ng.make_axis(g["k"], "K")]
    w_value = rng.normal(0, 0.5, [a.length for a in w_axes]).astype(np.float32).astype(np.float64)
    x, w = ng.variable(x_axes, initial_value=x_value), ng.variable(w_axes, initial_value=w_value)
    y = ng.convolution(x, w, strides=g["strides"], padding=g["padding"], dilation=g["dilation"], groups=g["groups"])
    dy = ng.placeholder(y.axes)
    dy_value = rng.standard_normal(y.axes.lengths)
    return [y, ng.gradients(y, [w], error=dy)[0]], dy, (x_value, w_value, dy_value)


def run(monkeypatch, mode: str, results, dy, dy_value, dtype: str = "float64", threads: int = 1):
    monkeypatch.setenv("NG_CONV", mode)
    monkeypatch.setenv("NG_THREADS", str(threads))
    with ng.transformers.make_transformer(float_dtype=dtype) as t:
        computation = t.computation(results, dy)
        return [np.asarray(v) for v in computation(dy_value.astype(dtype))], computation


def torch_reference(g: dict[str, Any], x: np.ndarray, w: np.ndarray, dy: np.ndarray) -> list[np.ndarray]:
    """y and dW from PyTorch in float64, in our layouts."""
    rank = len(g["lengths"])
    xt = x if g["batch_first"] else np.moveaxis(x, -1, 0)
    xt = torch.tensor(np.pad(xt, [(0, 0), (0, 0), *g["padding"]]))
    wt = torch.tensor(np.moveaxis(w, -1, 0), requires_grad=True)  # (K, Ci, *F)
    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[rank - 1]
    y = conv(xt, wt, stride=g["strides"], dilation=g["dilation"], groups=g["groups"])
    y.backward(torch.tensor(np.moveaxis(dy, -1, 0)))
    return [np.moveaxis(y.detach().numpy(), 0, -1), np.moveaxis(wt.grad.numpy(), 0, -1)]


@pytest.mark.parametrize("seed", range(16))
def test_random_geometries_match_im2col_and_torch(monkeypatch, seed):
    g = geometry(seed)
    results, dy, (x, w, dyv) = build(g, seed)
    made = []
    for name in ("conv_into", "bprop_filter"):
        real = getattr(conv_image, name)
        monkeypatch.setattr(conv_image, name, lambda *a, _real=real, _name=name: made.append(_name) or _real(*a))
    ours, _ = run(monkeypatch, "image", results, dy, dyv, threads=1 + seed % 2)
    arg = ConvArg(g["strides"], g["padding"], g["dilation"], g["groups"])
    if live_taps(g["lengths"], g["fshape"], arg) is None:  # (taps that read only padding may be cut: im2col)
        assert "conv_into" in made
    assert ("bprop_filter" in made) == (g["groups"] == 1)  # no grouped per-image filter gradient
    assert_matches_im2col_and_torch(monkeypatch, g, ours, results, dy, (x, w, dyv))


def assert_matches_im2col_and_torch(monkeypatch, g: dict[str, Any], ours: list[np.ndarray], results, dy,
                                    values: tuple[np.ndarray, ...]) -> None:
    """``ours`` (y and dW, float64) equal the im2col kernel's and PyTorch's to 1e-10 of their scale."""
    x, w, dyv = values
    reference, _ = run(monkeypatch, "im2col", results, dy, dyv)
    expected = torch_reference(g, x, w, dyv)
    for name, got, theirs, want in zip(("y", "dw"), ours, reference, expected):
        scale = max(np.abs(want).max(), 1.0)
        assert got.shape == want.shape, name
        assert np.abs(got - want).max() <= 1e-10 * scale, (name, g)
        assert np.abs(got - theirs).max() <= 1e-10 * scale, (name, g)


@pytest.mark.parametrize("threads", [1, 2])
def test_float32_batch_first_two_workers(monkeypatch, threads):
    """A ResNet stem's shape at a small batch: 3 -> 8 channels, 3x3 pad 1 on 9x9, batch 5 first; the images
    split 3 + 2 over two workers."""
    g = dict(c=3, k=8, n=5, lengths=(9, 9), fshape=(3, 3), strides=(1, 1), dilation=(1, 1),
             padding=((1, 1), (1, 1)), groups=1, batch_first=True)
    results, dy, (x, w, dyv) = build(g)
    ours, _ = run(monkeypatch, "image", results, dy, dyv, "float32", threads)
    expected = torch_reference(g, x, w, dyv)
    for got, want in zip(ours, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_constant_filters_are_held(monkeypatch):
    """An inference filter (a constant, reordered as an imported one arrives) is prepared once and right on
    every call; batch 1 has no per-image form."""
    monkeypatch.setenv("NG_CONV", "image")
    rng = np.random.default_rng(3)
    C, H, W, N = ng.make_axis(4, "C"), ng.make_axis(6, "H"), ng.make_axis(5, "W"), ng.make_axis(3, "N")
    K, R, S = ng.make_axis(6, "K"), ng.make_axis(3, "R"), ng.make_axis(3, "S")
    kcrs = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    w = ng.axes_with_order(ng.constant(kcrs, [K, C, R, S]), [C, R, S, K])
    x = ng.placeholder([C, H, W, N])
    with ng.transformers.make_transformer() as t:
        f = t.computation(ng.convolution(x, w, padding=1), x)
        for seed in range(3):
            xv = np.random.default_rng(seed).standard_normal((4, 6, 5, 3)).astype(np.float32)
            want = torch.nn.functional.conv2d(torch.tensor(xv.transpose(3, 0, 1, 2)), torch.tensor(kcrs), padding=1)
            np.testing.assert_allclose(f(xv), want.numpy().transpose(1, 2, 3, 0), rtol=1e-4, atol=1e-4)
    assert conv_image.applies(x.axes, np) and not conv_image.applies(ng.make_axes([C, H, W, ng.make_axis(1, "N")]),
                                                                        np)


def test_the_choice_measures_every_layout_and_records_it(monkeypatch, tmp_path):
    """``NG_CONV=auto``: a 3x3 layer at batch 4 times im2col, Winograd and per image (and, forward, channels
    last), keeps the fastest and records the medians; a second transformer reads the (final) record and measures
    nothing."""
    monkeypatch.delenv("NG_CONV", raising=False)
    g = dict(c=4, k=4, n=4, lengths=(8, 8), fshape=(3, 3), strides=(1, 1), dilation=(1, 1),
             padding=((1, 1), (1, 1)), groups=1, batch_first=False)
    results, dy, (x, w, dyv) = build(g)
    monkeypatch.setenv("NG_THREADS", "1")
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        step = t.computation(results, dy)
        for _ in range(conv_choice.CALLS_TO_DECIDE):  # one candidate timed a call
            got = step(dyv)
    expected = torch_reference(g, x, w, dyv)
    for ours, want in zip(got, expected):
        np.testing.assert_allclose(ours, want, rtol=1e-9, atol=1e-9)
    record = json.loads(conv_choice.choices_path().read_text())
    forward = [v for key, v in record.items() if key.startswith("conv|")]
    filters = [v for key, v in record.items() if key.startswith("bprop_filter|")]
    assert len(forward) == len(filters) == 1
    # (4 images of 8x8 are 256 output columns: the forward also times the channels-last kernel, if numba is there)
    assert set(forward[0]["ms"]) - {"channels_last"} == set(filters[0]["ms"]) == {"im2col", "winograd", "image"}
    for entry in (*forward, *filters):
        assert entry["chosen"] == min(entry["ms"], key=entry["ms"].get)
    assert "image" in conv_choice.report()

    for entry in record.values():  # final (a near tie is measured again by up to MEASURE_PROCESSES processes)
        entry["runs"] = conv_choice.MEASURE_PROCESSES
    conv_choice.choices_path().write_text(json.dumps(record))
    calls = []
    real = conv_choice.choose
    monkeypatch.setattr(conv_choice, "choose", lambda key, candidates, ready=None: calls.append(key) or real(
        key, candidates, ready))
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)
    monkeypatch.setattr(conv_choice, "TIMED_CALLS", 0)  # a measurement now would fail: min() of nothing
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        again = t.computation(results, dy)(dyv)
    for ours, want in zip(again, expected):
        np.testing.assert_allclose(ours, want, rtol=1e-9, atol=1e-9)
    assert len(calls) >= 2


def test_a_record_from_before_the_image_layout_is_measured_again(monkeypatch):
    """A settled record that timed only im2col and Winograd does not decide a layer that now has a third
    candidate: the layer is measured again, and the record gains the third median."""
    key = conv_choice.layer_key("conv", [(4, 8, 8, 4), (4, 3, 3, 4)], ConvArg((1, 1), ((1, 1),) * 2, (1, 1)),
                                "float32")
    conv_choice.choices_path().parent.mkdir(parents=True, exist_ok=True)
    conv_choice.choices_path().write_text(json.dumps({key: {"chosen": "im2col", "ms": {"im2col": 1.0,
                                                                                        "winograd": 9.0}}}))

    def candidate(name):
        def kernel(out, *args):
            return out
        kernel.__name__ = name
        return kernel

    two = {"im2col": candidate("a"), "winograd": candidate("b")}
    assert conv_choice.choose(key, two) is two["im2col"]  # settled for these two
    three = {**two, "image": candidate("c")}
    measuring = conv_choice.choose(key, three)
    assert measuring not in three.values()
    for _ in range(3 * conv_choice.TIMED_CALLS):
        measuring(np.zeros(1))
    assert set(json.loads(conv_choice.choices_path().read_text())[key]["ms"]) == {"im2col", "winograd", "image"}


def test_one_process_measures_a_layer_once(monkeypatch):
    """Two computations compiled before either ran, and a third compiled after, all run the kernel the first
    one's calls measured, even where the record is a near tie that later processes measure again: a model and its
    reloaded copy then round alike."""
    calls = {"a": 0, "b": 0}

    def candidate(name):
        def kernel(out, *args):
            calls[name] += 1
            return out
        return kernel

    candidates = {"im2col": candidate("a"), "winograd": candidate("b")}
    first, second = conv_choice.choose("k", candidates), conv_choice.choose("k", candidates)
    for _ in range(2 * conv_choice.TIMED_CALLS):
        first(np.zeros(1))
    measured = dict(calls)
    assert measured == {"a": conv_choice.TIMED_CALLS, "b": conv_choice.TIMED_CALLS}
    second(np.zeros(1))
    third = conv_choice.choose("k", candidates)
    assert third is candidates[conv_choice.MEASURED["k"]["chosen"]]
    winner = "a" if conv_choice.MEASURED["k"]["chosen"] == "im2col" else "b"
    assert calls[winner] == measured[winner] + 1 and sum(calls.values()) == sum(measured.values()) + 1
