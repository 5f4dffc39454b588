"""compile_for_inference: fp32 outputs equal the model's, batch norm folded, training ops gone, feeding checked."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from inference_models import IMAGE, datasets, mnist, trained_cnn, trained_mlp

import ngraph_core as ng
from ngraph_core.inference import CompiledModel, InferenceError, compile_for_inference
from ngraph_core.inference.freeze import drop_training_ops

T = ng.OpType


def op_kinds(ops: list[ng.Op]) -> set[str]:
    return {op.op.value for op in ng.ordered_ops(ops)}


def test_fp32_mlp_equals_predict_and_drops_dropout() -> None:
    model = trained_mlp()
    x_test = mnist()[2]
    compiled = compile_for_inference(model, batch_size=100)
    assert isinstance(compiled, CompiledModel) and compiled.precision == "fp32" and compiled.accuracy_drop is None
    assert [s.shape for s in compiled.inputs] == [(784, 100)] and compiled.outputs[0].shape == (10, 100)
    got = compiled.predict(x_test)
    np.testing.assert_allclose(got, model.predict(x_test), rtol=1e-5, atol=1e-6)
    # dropout is the identity in inference: no random op survives; weights are constants of the executable graph
    kinds = op_kinds(list(compiled.graph_outputs))
    assert not kinds & {"uniform", "normal", "variable", "stop_gradient"}
    assert sum(1 for op in ng.ordered_ops(list(compiled.graph_outputs)) if op.op is T.DOT) == 2


def test_fp32_cnn_folds_batch_norm_and_equals_predict() -> None:
    model = trained_cnn()
    x_test = mnist()[2][:300]
    compiled = compile_for_inference(model, batch_size=64)  # 300 = 4 full batches + a padded one
    np.testing.assert_allclose(compiled.predict(x_test), model.predict(x_test), rtol=1e-4, atol=1e-6)
    template = ng.ordered_ops(list(compiled.template_outputs))
    # neon's inference BatchNorm is (h - mean) * rsqrt(var + eps) * gamma + beta: after folding, each
    # BatchNorm scope keeps only the bias add (and its broadcast) after the conv
    bn_kinds = {op.op.value for op in template if any(s.kind == "BatchNorm" for s in op.meta.scope)}
    assert bn_kinds == {"add", "broadcast"}
    assert not op_kinds(list(compiled.template_outputs)) & {"moments", "rsqrt", "sqrt"}
    plan_kinds = {op.op.value for op in compiled.new_executor().computation.graph.order}
    assert not plan_kinds & {"moments", "rsqrt", "sqrt", "variable"}
    # the conv filters are frozen slots: BN's scale is multiplied into them at compile time
    convs = [op for op in template if op.op is T.CONV]
    assert len(convs) == 2 and all(c.src[1] in compiled.weights for c in convs)


def test_evaluate_matches_model_eval() -> None:
    from neon.metrics import Accuracy

    model = trained_mlp()
    _, test = datasets()
    compiled = compile_for_inference(model, batch_size=100)
    assert compiled.evaluate(test) == pytest.approx(model.eval(test, Accuracy()), abs=1e-9)
    assert compiled.evaluate(test) > 0.85


def make_graph() -> tuple[ng.Op, ng.Op, ng.Op, ng.Op, np.ndarray, np.ndarray]:
    F, H, N = ng.make_axis(6, "F"), ng.make_axis(4, "H"), ng.make_axis(3, "N")
    x = ng.placeholder([F, N], name="x")
    w = ng.variable([H, F], initial_value=0.0, name="W")
    b = ng.variable([H], initial_value=0.0, name="b")
    y = ng.relu(ng.dot(ng.stop_gradient(w), x) + b)
    rng = np.random.default_rng(1)
    return x, y, w, b, rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal(4).astype(np.float32)


def test_chained_stop_gradients_are_dropped_without_copying_the_graph_below() -> None:
    """Two softmaxes in a row (each max under a stop_gradient), as in stacked attention layers: the inference
    graph computes the first softmax once, not once more under the second one's stop_gradient."""
    F, N = ng.make_axis(6, "F"), ng.make_axis(3, "N")
    x = ng.placeholder([F, N], name="x")
    y = ng.softmax(ng.softmax(ng.softmax(x, normalization_axes=[F]) * 2.0, normalization_axes=[F]) * 3.0,
                   normalization_axes=[F])
    before = ng.ordered_ops([y])
    (dropped,) = drop_training_ops([y])
    after = ng.ordered_ops([dropped])
    assert sum(op.op is T.STOP_GRADIENT for op in before) == 3
    assert not any(op.op is T.STOP_GRADIENT for op in after)
    assert sum(op.op is T.EXP for op in after) == 3 and len(after) == len(before) - 3
    compiled = compile_for_inference(([x], [y]), batch_size=3)
    feed = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32)

    def softmax(v: np.ndarray) -> np.ndarray:
        e = np.exp(v - v.max(axis=0))
        return e / e.sum(axis=0)

    np.testing.assert_allclose(compiled.infer(feed)[0], softmax(softmax(softmax(feed) * 2) * 3), rtol=1e-5)


def test_ops_source_with_weights_removes_stop_gradient() -> None:
    x, y, w, b, w_value, b_value = make_graph()
    compiled = compile_for_inference(([x], [y]), weights={w: w_value, b: b_value}, batch_size=3)
    assert "stop_gradient" not in op_kinds(list(compiled.template_outputs))
    feed = np.random.default_rng(2).standard_normal((6, 3)).astype(np.float32)
    (out,) = compiled.infer(feed)
    np.testing.assert_allclose(out, np.maximum(w_value @ feed + b_value[:, None], 0), rtol=1e-5, atol=1e-6)
    # by name, as a dict, and from another executor: the same values
    np.testing.assert_array_equal(compiled.infer(x=feed)[0], out)
    np.testing.assert_array_equal(compiled.infer({"x": feed})[0], out)
    np.testing.assert_array_equal(compiled.new_executor()(feed)[0], out)


def test_graph_document_source_uses_initial_values() -> None:
    F, N = ng.make_axis(3, "F"), ng.make_axis(2, "N")
    x = ng.placeholder([F, N], name="x")
    w = ng.variable([F], initial_value=np.array([1.0, -2.0, 0.5], dtype=np.float32), name="w")
    text = ng.serialize([ng.sum(x * w, reduction_axes=[F]), x])
    compiled = compile_for_inference(text, batch_size=2)
    feed = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(compiled.infer(feed)[0], np.array([1.0, -2.0, 0.5]) @ feed, rtol=1e-6)


def test_executors_run_in_threads_like_infer() -> None:
    model = trained_mlp()
    compiled = compile_for_inference(model, batch_size=50)
    batches = [np.ascontiguousarray(mnist()[2][i * 50:(i + 1) * 50].T) for i in range(4)]
    expected = [compiled.infer(b)[0] for b in batches]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        run = compiled.new_executor()
        for _ in range(3):
            results[i] = run(batches[i])[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_array_equal(results[i], expected[i])


def test_memory_report_plans_an_arena() -> None:
    compiled = compile_for_inference(trained_cnn(), batch_size=8)
    report = compiled.memory_report()
    assert 0 < report.arena_bytes <= report.unplanned_bytes


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"precision": "int4"}, "precision"),
    ({"precision": "int8"}, "calibration"),
    ({"batch_size": 0}, "batch_size"),
])
def test_bad_arguments_raise(kwargs: dict, message: str) -> None:
    with pytest.raises(InferenceError, match=message):
        compile_for_inference(trained_mlp(), **kwargs)


def test_bad_sources_and_feeds_raise() -> None:
    with pytest.raises(InferenceError, match="expected a neon Model"):
        compile_for_inference(42)
    x, y, w, b, w_value, b_value = make_graph()
    with pytest.raises(InferenceError, match="writes variables"):
        compile_for_inference(([x], [ng.sequential([ng.assign(b, b * 2), y])]))
    with pytest.raises(InferenceError, match="not among the inputs"):
        compile_for_inference(([], [y]))
    compiled = compile_for_inference(([x], [y]), weights={w: w_value, b: b_value}, batch_size=3)
    with pytest.raises(InferenceError, match=r"expected shape \(6, 3\)"):
        compiled.infer(np.zeros((6, 4), np.float32))
    with pytest.raises(InferenceError, match="expected inputs named"):
        compiled.infer(z=np.zeros((6, 3), np.float32))
    with pytest.raises(InferenceError, match="expected 1 input"):
        compiled.infer()
    with pytest.raises(InferenceError, match="rows of 784"):
        compile_for_inference(trained_mlp()).predict(np.zeros((2, 10)))


def test_unbuilt_model_raises_model_error() -> None:
    from neon.layers import Affine
    from neon.model import Model, ModelError

    with pytest.raises(ModelError, match="no variables yet"):
        compile_for_inference(Model([Affine(3)]))


def test_cnn_input_is_image_shaped() -> None:
    compiled = compile_for_inference(trained_cnn(), batch_size=4)
    assert compiled.inputs[0].shape == (*IMAGE, 4) and compiled.inputs[0].batch_index == 3


def test_scalar_weights_keep_their_trained_value() -> None:
    F, N = ng.make_axis(3, "F"), ng.make_axis(2, "N")
    x = ng.placeholder([F, N], name="x")
    temperature = ng.variable([], initial_value=1.0, name="temperature")
    compiled = compile_for_inference(([x], [x * temperature]), weights={temperature: np.float32(3.0)}, batch_size=2)
    feed = np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(compiled.infer(feed)[0], 3 * feed)
    assert "variable" not in op_kinds(list(compiled.graph_outputs))
