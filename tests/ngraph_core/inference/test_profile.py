"""Per-layer performance counters: the profiled transformer's kernel hook and the ``-pc`` table."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.activations import Rectlin, Softmax
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine
from neon.model import Model
from ngraph_core.inference.profile import ProfileError, collect_counters, format_counters

RUNS = 3


def _mlp(profile: bool) -> Model:
    return Model([Affine(8, GlorotUniform(seed=0), bias=Constant(0.1), activation=Rectlin(), name="hidden"),
                  Affine(3, GlorotUniform(seed=1), bias=Constant(0.0), activation=Softmax(), name="out")],
                 profile=profile)


@pytest.fixture(scope="module")
def profiled() -> tuple[Model, np.ndarray]:
    model = _mlp(True)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    model.build((4,), batch_size=5)
    for _ in range(RUNS):
        out = model.predict(x, batch_size=5)
    return model, out


def test_calls_per_op_equal_runs_and_times_positive(profiled: tuple[Model, np.ndarray]) -> None:
    model, _ = profiled
    report = collect_counters(model.transformer)
    assert len(report.ops) >= 4  # two dots and at least the activations
    assert {c.calls for c in report.ops} == {RUNS}
    assert all(c.real_ns > 0 for c in report.ops)
    assert report.total_ns == sum(c.real_ns for c in report.ops)
    assert all(c.status == "EXECUTED" for c in report.ops)


def test_every_layer_appears_with_its_runs(profiled: tuple[Model, np.ndarray]) -> None:
    model, _ = profiled
    report = collect_counters(model)
    layers = {c.layer: c for c in report.layers(depth=2)}
    assert set(layers) == {"Sequential_0/hidden", "Sequential_0/out"}
    assert all(c.calls == RUNS for c in layers.values())
    assert sum(c.ops for c in layers.values()) == len(report.ops)
    assert sum(c.real_ns for c in layers.values()) == report.total_ns
    full = report.layers()  # full scope paths: the sub-layers (Linear_0, Bias_0, Activation_0) of each
    assert len(full) > 2 and all(c.layer.startswith(("Sequential_0/hidden/", "Sequential_0/out/")) for c in full)
    with pytest.raises(ProfileError, match="depth"):
        report.layers(depth=0)


def test_bytes_equal_output_nbytes(profiled: tuple[Model, np.ndarray]) -> None:
    model, out = profiled
    report = collect_counters(model.transformer)
    t = model.transformer
    for c in report.ops:
        op = next(op for op in t.profile_counters if op.name == c.name)
        expected = int(np.prod(op.axes.lengths, dtype=np.int64)) * np.dtype(t.dtype_of(op)).itemsize
        assert c.bytes == expected, c
    # the last op writes the probabilities: 5 samples x 3 classes of float32
    assert report.ops[-1].bytes == out.nbytes == 5 * 3 * 4


def test_profiled_results_equal_unprofiled() -> None:
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    plain, timed = _mlp(False), _mlp(True)
    np.testing.assert_allclose(timed.predict(x, batch_size=5), plain.predict(x, batch_size=5), rtol=1e-6)


def test_source_is_the_same_with_and_without_profiling() -> None:
    D, N = ng.make_axis(4, "D"), ng.make_axis(2, "N")
    X = ng.placeholder([D, N], name="X")
    y = ng.tanh(X) * 2.0 + 1.0
    with ng.transformers.make_transformer() as plain, ng.transformers.make_transformer(profile=True) as timed:
        f, g = plain.computation(y, X), timed.computation(y, X)
        assert f.source == g.source
        assert plain.profile_counters == {}  # an unprofiled plan binds the kernels themselves
        x = np.arange(8, dtype=np.float32).reshape(4, 2)
        np.testing.assert_allclose(g(x), np.tanh(x) * 2 + 1, rtol=1e-6)
        assert all(calls == 1 for _, calls, _ in timed.profile_counters.values())


def test_format_counters_table(profiled: tuple[Model, np.ndarray]) -> None:
    model, _ = profiled
    text = format_counters(collect_counters(model))
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["layer", "op", "kinds"]
    assert any("hidden" in line and "EXECUTED" in line and f"  {RUNS}  " in line for line in lines)
    assert lines[-1].startswith("Total time: ") and "ms over" in lines[-1]
    short = format_counters(collect_counters(model), per_op=False, top=1)
    assert len(short.splitlines()) == 4  # header, rule, the slowest layer, total


def test_unprofiled_transformer_is_refused() -> None:
    with ng.transformers.make_transformer() as t, pytest.raises(ProfileError, match="profile=True"):
        collect_counters(t)


def test_counters_of_a_compiled_model_executor() -> None:
    model = _mlp(False)
    model.build((4,), batch_size=2)
    compiled = ng.inference.compile_for_inference(model, batch_size=2)
    run = compiled.new_executor(profile=True)
    x = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)
    for _ in range(RUNS):
        out, = run(x)
    np.testing.assert_allclose(out, compiled.infer(x)[0], rtol=1e-6)
    report = collect_counters(run)  # an executor holds its transformer
    assert report.ops and {c.calls for c in report.ops} == {RUNS}
    assert {c.layer.split("/")[1] for c in report.ops if c.layer} <= {"hidden", "out"}
    assert report.ops[-1].bytes == out.nbytes
