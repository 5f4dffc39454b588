"""ONNX export: graphs, neon models (MLP, CNN with batch norm, LSTM and bi-directional sequence
classifiers) and an element-wise zoo go through ``export`` -> ``onnx.checker`` -> onnxruntime and
match our outputs within 1e-5 (float32), at batch 1 and 5 for models exported with a dynamic batch.
onnxruntime is fed batch-first arrays (the default ``layout="onnx"``: ``[N, F]``, ``[N, C, H, W]``,
``[N, T, F]``, ``[N, T]``) and its outputs match ours transposed the same way. Also: deconvolution,
sub-graph calls and gradient-shaped pads, a round trip through our importer, atomic writes, the
static-batch fallback and the error for an op without an ONNX form."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ngraph_core as ng
from neon.activations import Softmax
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator
from neon.layers import (
    LSTM,
    Affine,
    BiRNN,
    Conv,
    Deconv,
    LookupTable,
    Pool,
    PositionEmbedding,
    RecurrentMean,
    SinusoidalPositionEmbedding,
    TransformerEncoder,
)
from neon.model import Model
from neon.optimizers import GradientDescentMomentum
from ngraph_core.frontends.onnx.export import ExportError, ExportWarning, export
from ngraph_core.frontends.onnx.export_layout import onnx_order

ATOL = 1e-5


def run_onnx(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def batch_first(array: np.ndarray, op: ng.Op) -> np.ndarray:
    """``array`` (in ``op``'s axes' order, batch last) in the ONNX layout: batch first, then time, then the rest."""
    return np.transpose(array, onnx_order(op.axes))


def check_outputs(proto: onnx.ModelProto, inputs: list[ng.Op], outputs: list[ng.Op], feeds: list[np.ndarray],
                  ours: list[np.ndarray]) -> None:
    """onnxruntime on the feeds made batch first matches our outputs made batch first."""
    names = [i.name for i in proto.graph.input]
    theirs = run_onnx(proto, {n: batch_first(f, p) for n, f, p in zip(names, feeds, inputs)})
    for i, (got, want, op) in enumerate(zip(theirs, ours, outputs)):
        np.testing.assert_allclose(got, batch_first(want, op), atol=ATOL, rtol=1e-5, err_msg=f"output {i}: {op!r}")


def run_ours(inputs: list[ng.Op], outputs: list[ng.Op], feeds: list[np.ndarray], transformer=None) -> list:
    if transformer is not None:
        return list(transformer.computation(list(outputs), *inputs)(*feeds))
    with ng.transformers.make_transformer() as t:
        return list(t.computation(list(outputs), *inputs)(*feeds))


def model_feeds(inputs: list[ng.Op], rng: np.random.Generator) -> list[np.ndarray]:
    """Random data for a neon model's inputs: frames or dense samples, and valid lengths for sequences."""
    feeds = []
    for p in inputs:
        if p.dtype.startswith("int"):  # valid lengths [N], in [1, T]
            steps = next(a.length for a in inputs[0].axes if a.is_recurrent)
            feeds.append(rng.integers(1, steps + 1, p.axes.lengths).astype(p.dtype))
        else:
            feeds.append(rng.standard_normal(p.axes.lengths).astype(p.dtype))
    return feeds


def check_model(model: Model, proto: onnx.ModelProto, batches: tuple[int, ...] = (1, 5)) -> None:
    rng = np.random.default_rng(1)
    onnx.checker.check_model(proto, full_check=True)
    for n in batches:
        inputs, outputs, _ = model.__ngraph_inference__(n)
        feeds = model_feeds(inputs, rng)
        ours = run_ours(inputs, outputs, feeds, model.transformer)
        check_outputs(proto, inputs, outputs, feeds, ours)


def dims(proto: onnx.ModelProto, i: int = 0) -> list:
    return [d.dim_param or d.dim_value for d in proto.graph.input[i].type.tensor_type.shape.dim]


# -- graphs and models ---------------------------------------------------------------------------------


def test_plain_mlp_graph_with_trained_weights_from_a_transformer() -> None:
    F, H, K, N = ng.make_axis(6, "F"), ng.make_axis(8, "H"), ng.make_axis(3, "K"), ng.make_axis(4, "N")
    x = ng.placeholder([F, N], name="x")
    w1 = ng.variable([H, F], initial_value=lambda axes: np.full(axes.lengths, 0.1, np.float32))
    b1 = ng.variable([H], initial_value=0.0)
    w2 = ng.variable([K, H], initial_value=0.2)
    y = ng.softmax(ng.dot(w2, ng.relu(ng.dot(w1, x) + b1)))
    rng = np.random.default_rng(0)
    with ng.transformers.make_transformer() as t:
        for v in (w1, b1, w2):
            t.write_variable(v, rng.standard_normal(v.axes.lengths).astype(np.float32))
        proto = export(([x], [y]), transformer=t, output_names=["probs"])
        feed = rng.standard_normal((6, 4)).astype(np.float32)
        (ours,) = run_ours([x], [y], [feed], t)
    assert dims(proto) == ["N", 6] and proto.graph.output[0].name == "probs"
    np.testing.assert_allclose(run_onnx(proto, {"x": feed.T})[0], ours.T, atol=ATOL)
    # without a transformer the variables' initial values are exported
    init = {i.name.rsplit("/", 1)[-1]: onnx.numpy_helper.to_array(i) for i in export(([x], [y])).graph.initializer}
    assert any(a.shape == (8, 6) and np.all(a == np.float32(0.1)) for a in init.values())
    u, v = ng.variable([H], initial_value=0.0, name="u"), ng.variable([H], initial_value=0.0, name="v")
    names = {i.name for i in export(([x], [ng.dot(w1, x) + u - v])).graph.initializer}
    assert {"u", "v"} <= names  # equal values, still one initializer per variable


def test_neon_mlp_trained_a_few_steps_exports_with_a_dynamic_batch(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((64, 10)).astype(np.float32), rng.integers(0, 3, 64)
    model = Model([Affine(16, activation="relu"), Affine(3, activation=Softmax())])
    model.fit(ArrayIterator(X, y, nclass=3, batch_size=16), CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9),
              num_epochs=2, progress=False)
    path = tmp_path / "mlp.onnx"
    proto = export(model, path)
    assert onnx.load(str(path)) == proto  # the written file is the whole model
    assert dims(proto) == ["N", 10]
    names = [n.name for n in proto.graph.node]
    assert any(n.startswith("Sequential_0/Affine_0/Linear_0/") for n in names), names  # layer names kept
    assert {i.name for i in proto.graph.initializer} >= {"Sequential_0/Affine_0/Linear_0/W"}
    check_model(model, proto)


def test_neon_cnn_with_batch_norm_in_inference_mode() -> None:
    rng = np.random.default_rng(2)
    model = Model([Conv((3, 3, 4), padding=1, batch_norm=True, activation="relu"), Pool(2),
                   Conv((3, 3, 6), strides=2, padding=1, dilation=1, activation="relu"), Pool(3, op="avg", padding=1),
                   Affine(5, activation=Softmax())])
    model.build((3, 8, 8), batch_size=2)
    for v in model.variables:  # trained-looking weights and running statistics
        value = rng.uniform(0.5, 1.5, v.axes.lengths) if "var" in v.meta.labels else rng.standard_normal(v.axes.lengths)
        model.transformer.write_variable(v, value.astype(np.float32))
    proto = export(model, opset=18)
    kinds = {n.op_type for n in proto.graph.node}
    assert {"Conv", "MaxPool", "AveragePool"} <= kinds
    check_model(model, proto)


def test_neon_lstm_sequence_classifier_exports_a_scan_with_valid_lengths() -> None:
    model = Model([LSTM(6), Affine(3, activation=Softmax())])
    model.build((4, 7), batch_size=1, kind="frames")
    proto = export(model)
    assert [n.op_type for n in proto.graph.node].count("Scan") == 1
    assert [i.name for i in proto.graph.input] == ["X", "lengths"]
    check_model(model, proto)


def test_a_transformer_encoder_classifier_exports_and_runs_in_onnxruntime() -> None:
    """Position embeddings, pre-norm encoder layers (multi-head attention with the key-length mask, GELU feed
    forward, layer norm) and a mean over the valid steps: batch_dot as Einsum, onnxruntime agrees with us."""
    model = Model([Affine(8), SinusoidalPositionEmbedding(), PositionEmbedding(12),
                   TransformerEncoder(2, 2, 16, dropout=0.1, activation="gelu", norm_first=True, final_norm=True),
                   RecurrentMean(), Affine(3, activation=Softmax())])
    model.build((4, 7), batch_size=1, kind="frames")
    proto = export(model)
    assert [i.name for i in proto.graph.input] == ["X", "lengths"]
    assert "Einsum" in {n.op_type for n in proto.graph.node}
    check_model(model, proto, batches=(1, 3))


def test_neon_bidirectional_rnn_over_an_embedding_exports_a_reverse_scan() -> None:
    model = Model([LookupTable(12, 5), BiRNN(4), Affine(2, activation=Softmax())])
    model.build((6,), batch_size=2, kind="tokens")
    rng = np.random.default_rng(3)
    proto = export(model)
    scans = [n for n in proto.graph.node if n.op_type == "Scan"]
    assert len(scans) == 2 and any(a.name == "scan_input_directions" and a.ints == [1]
                                   for s in scans for a in s.attribute)
    for n in (1, 5):
        inputs, outputs, _ = model.__ngraph_inference__(n)
        ids = rng.integers(0, 14, inputs[0].axes.lengths).astype(inputs[0].dtype)  # 12, 13: out of the table
        lengths = rng.integers(1, 7, (n,)).astype(inputs[1].dtype)
        (ours,) = run_ours(inputs, outputs, [ids, lengths], model.transformer)
        theirs = run_onnx(proto, {"X": ids.T, "lengths": lengths})[0]  # token ids [N, T]
        np.testing.assert_allclose(theirs, ours.transpose(2, 1, 0), atol=ATOL)  # [K, T, N] -> [N, T, K]


def test_deconvolution_exports_as_conv_transpose() -> None:
    model = Model([Deconv((3, 3, 4), strides=2, padding=1, output_padding=1, activation="relu")])
    model.build((2, 5, 5), batch_size=1)
    proto = export(model, dynamic_batch=False)
    assert "ConvTranspose" in {n.op_type for n in proto.graph.node} and dims(proto) == [1, 2, 5, 5]
    check_model(model, proto, batches=(1,))


def test_a_compiled_computation_exports_its_placeholders_and_results() -> None:
    C, N = ng.make_axis(4, "C"), ng.make_axis(3, "N")
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([C], initial_value=0.0)
    with ng.transformers.make_transformer() as t:
        t.write_variable(w, np.arange(4, dtype=np.float32))
        comp = t.computation([ng.tanh(x * w), ng.sum(x, out_axes=[N])], x)
        proto = export(comp, input_names=["inp"], output_names=["a", "b"])
        feed = np.random.default_rng(4).standard_normal((4, 3)).astype(np.float32)
        ours = comp(feed)
    check_outputs(proto, [x], comp.results, [feed], list(ours))


def test_an_exported_cnn_imports_back_and_runs_on_our_transformer() -> None:
    from ngraph_core.frontends.onnx import import_model  # the importer (issue 16, item 1)

    model = Model([Conv((3, 3, 4), padding=1, batch_norm=True, activation="relu"), Pool(2),
                   Affine(3, activation=Softmax())])
    model.build((2, 6, 6), batch_size=3)
    inputs, outputs, _ = model.__ngraph_inference__(3)
    feed = np.random.default_rng(9).standard_normal((2, 6, 6, 3)).astype(np.float32)
    (ours,) = run_ours(inputs, outputs, [feed], model.transformer)
    (back,) = import_model(export(model), dims={"N": 3}).run({"X": feed.transpose(3, 0, 1, 2)})  # [N, C, H, W]
    np.testing.assert_allclose(back, ours.T, atol=ATOL)
    (back,) = import_model(export(model, layout="native"), dims={"N": 3}).run({"X": feed})
    np.testing.assert_allclose(back, ours, atol=ATOL)
    model = Model([LookupTable(12, 5), LSTM(4, return_sequence=True), Affine(2)])  # token ids [N, T]
    model.build((6,), batch_size=3, kind="tokens")
    inputs, outputs, _ = model.__ngraph_inference__(3)
    feeds = [np.random.default_rng(9).integers(0, 12, (6, 3)).astype(inputs[0].dtype),
             np.array([6, 2, 1], inputs[1].dtype)]
    (ours,) = run_ours(inputs, outputs, feeds, model.transformer)
    (back,) = import_model(export(model), dims={"N": 3}).run({"X": feeds[0].T, "lengths": feeds[1]})
    np.testing.assert_allclose(back, batch_first(ours, outputs[0]), atol=ATOL)


def test_layouts_inputs_batch_first_by_default_and_batch_last_as_an_option() -> None:
    """onnxruntime runs MLP, CNN, LSTM and embedding models from batch-first arrays made as such."""
    rng = np.random.default_rng(10)
    cases = [(Model([Affine(5, activation="relu"), Affine(3, activation=Softmax())]), (784,), "dense",
              [["N", 784]], ["N", 3]),
             (Model([Conv((3, 3, 2), padding=1, activation="relu"), Pool(2), Affine(3)]), (1, 28, 28), "dense",
              [["N", 1, 28, 28]], ["N", 3]),
             (Model([LSTM(6), Affine(3)]), (4, 7), "frames", [["N", 7, 4], ["N"]], ["N", 3]),
             (Model([LookupTable(12, 5), LSTM(4, return_sequence=True), Affine(2)]), (6,), "tokens",
              [["N", 6], ["N"]], ["N", 6, 2])]
    for model, shape, kind, want_in, want_out in cases:
        model.build(shape, batch_size=2, kind=kind)
        proto = export(model)
        assert [dims(proto, i) for i in range(len(want_in))] == want_in
        assert [d.dim_param or d.dim_value for d in proto.graph.output[0].type.tensor_type.shape.dim] == want_out
        inputs, outputs, _ = model.__ngraph_inference__(3)
        feeds = []  # batch first, as a user holds them: [N, F], [N, C, H, W], [N, T, F], [N, T]
        for p, d in zip(inputs, want_in):
            lengths = [3 if n == "N" else n for n in d]
            feeds.append(rng.integers(0 if kind == "tokens" else 1, 7, lengths).astype(p.dtype)
                         if p.dtype.startswith("int") else rng.standard_normal(lengths).astype(p.dtype))
        (theirs,) = run_onnx(proto, {p.meta.name: f for p, f in zip(inputs, feeds)})
        native = [np.transpose(f, np.argsort(onnx_order(p.axes))) for p, f in zip(inputs, feeds)]
        (ours,) = run_ours(inputs, outputs, native, model.transformer)
        np.testing.assert_allclose(theirs, batch_first(ours, outputs[0]), atol=ATOL, rtol=1e-5)
        native_proto = export(model, layout="native")  # the graph's own order, no transposes
        assert dims(native_proto) == [*shape, "N"]
        (back,) = run_onnx(native_proto, {p.meta.name: f for p, f in zip(inputs, native)})
        np.testing.assert_allclose(back, ours, atol=ATOL, rtol=1e-5)
        props = {p.key: p.value for p in proto.metadata_props}, {p.key: p.value for p in native_proto.metadata_props}
        assert props[0]["ngraph.layout"] == "onnx" and props[1]["ngraph.layout"] == "native"


# -- the element-wise zoo and the movement ops ----------------------------------------------------------------


def zoo(n: int) -> tuple[list[ng.Op], list[ng.Op]]:
    """Every element-wise op we map, broadcasts by name, reductions and movement, over ``[C, N]`` inputs."""
    C, D, N = ng.make_axis(4, "C"), ng.make_axis(3, "D"), ng.make_axis(n, "N")
    x, p = ng.placeholder([C, N], name="x"), ng.placeholder([C, N], name="p")  # any sign; positive
    u, b = ng.placeholder([C, N], name="u"), ng.placeholder([C], name="b")  # in (-1, 1); a per-C vector
    ids = ng.placeholder([D, N], dtype="int64", name="ids")
    m = ng.placeholder([D, C], name="m")  # aligned by name to [C, N, D]: transposed, then broadcast
    table = ng.constant(np.arange(20, dtype=np.float32).reshape(4, 5) / 7, [C, ng.make_axis(5, "V")])
    unary = [ng.negative(x), ng.absolute(x), ng.exp(x), ng.log(p), ng.log1p(p), ng.sqrt(p), ng.rsqrt(p),
             ng.square(x), ng.reciprocal(p), ng.tanh(x), ng.sigmoid(x), ng.relu(x), ng.sign(x), ng.sin(x), ng.cos(x),
             ng.stop_gradient(x), ng.cast(ng.cast(x * 3, "int32"), "float32"), ng.floor(x), ng.ceil(x),
             ng.round(x * 3), ng.erf(x), ng.tan(u), ng.asin(u), ng.acos(u), ng.atan(x), ng.sinh(x), ng.cosh(x),
             ng.asinh(x), ng.acosh(p + 1), ng.atanh(u)]
    binary = [x + b, x - b, b * x, x / p, ng.power(p, u), ng.maximum(x, u), ng.minimum(x, 0.25), ng.mod(x, 0.7),
              ng.equal(ng.round(x), ng.round(u)), ng.not_equal(ng.round(x), 0.0), ng.less(x, u), ng.less_equal(x, b),
              ng.greater(x, b), ng.greater_equal(x, u), ng.where(ng.greater(x, 0.0), x, b), x + 1.0 + b + 2.0,
              ng.broadcast(x, [C, N, D]) * m, ng.broadcast(b, [C, N]) * 2.0]
    reduce = [ng.sum(x, out_axes=[N]), ng.max(x, reduction_axes=[C]), ng.min(x, out_axes=[N]),
              ng.prod(u, out_axes=[C]), ng.mean(x * b, out_axes=[N]),
              ng.cast(ng.argmax(x, out_axes=[N]), "float32"), ng.cast(ng.argmin(x, out_axes=[N]), "float32"),
              ng.softmax(x), ng.log_softmax(x)]
    moved = [ng.tensor_slice(x, [slice(3, None, -2)]), ng.tensor_slice(x, [2]), ng.pad(x, [(1, 2), 0]),
             ng.concat_along_axis([x, u], C), ng.flatten(ng.broadcast(x, [C, D, N])),
             ng.gather(table, ids, "V"), ng.dot(table, ng.broadcast(x + b, [C, N])),
             ng.dot(ng.constant(np.ones((4, 3), np.float32), [C, D]), ng.broadcast(x, [D, C, N])),
             ng.moments(x, [C])[1], ng.cast_axes(x, [ng.make_axis(4, "E"), N])]
    return [x, p, u, b, ids, m], unary + binary + reduce + moved


def zoo_feeds(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.standard_normal((4, n)).astype(np.float32), rng.uniform(0.2, 3, (4, n)).astype(np.float32),
            rng.uniform(-0.9, 0.9, (4, n)).astype(np.float32), rng.standard_normal(4).astype(np.float32),
            rng.integers(-1, 6, (3, n)),  # -1 and 5 are out of the table: zero rows
            rng.standard_normal((3, 4)).astype(np.float32)]


def test_element_wise_zoo_matches_at_two_batch_sizes() -> None:
    inputs, outputs = zoo(2)
    proto = export((inputs, outputs))
    assert dims(proto) == ["N", 4]
    for n in (1, 5):
        ins, outs = zoo(n)
        feeds = zoo_feeds(n)
        check_outputs(proto, ins, outs, feeds, run_ours(ins, outs, feeds))


def test_convolution_geometry_groups_strides_dilation_and_pool_padding() -> None:
    C, H, W, N = ng.make_axis(6, "C"), ng.make_axis(9, "H"), ng.make_axis(7, "W"), ng.make_axis(2, "N")
    x = ng.placeholder([N, C, H, W], name="x")  # batch first: roles are read by position, N anywhere
    filters = np.random.default_rng(6).standard_normal((2, 3, 2, 6)).astype(np.float32)
    w = ng.constant(filters, [ng.make_axis(2, "Ci"), ng.make_axis(3, "R"), ng.make_axis(2, "S"), ng.make_axis(6, "K")])
    y = ng.convolution(x, w, strides=(2, 1), padding=((1, 2), (0, 1)), dilation=(1, 2), groups=3)
    z = ng.pooling(y, 3, op="avg", strides=2, padding=1, count_include_pad=False)
    m = ng.pooling(y, (3, 2), strides=(1, 2), padding=(1, 0))
    # ceil mode drops a last window that would start in the right padding, and no average counts
    # what it adds beyond the padding (PyTorch's rule; not what ONNX's ceil_mode promises)
    ceil = [ng.pooling(x, (2, 3), op=op, strides=(3, 2), padding=(1, 1), ceil_mode=True, count_include_pad=cip)
            for op, cip in (("max", True), ("avg", True), ("avg", False))]
    ceil.append(ng.pooling(x, 3, op="avg", strides=2, ceil_mode=True))
    feed = np.random.default_rng(7).standard_normal((2, 6, 9, 7)).astype(np.float32)
    proto = export(([x], [y, z, m, *ceil]), dynamic_batch=False)
    check_outputs(proto, [x], [y, z, m, *ceil], [feed], run_ours([x], [y, z, m, *ceil], [feed]))


@ng.custom_gradient
def _clipped(x: ng.Op) -> tuple[ng.Op, Callable]:
    return ng.tanh(x), lambda ctx: [ng.minimum(ng.maximum(ctx, -1.0), 1.0)]


def test_sub_graph_calls_custom_gradients_sequential_and_a_gradient_graph() -> None:
    """``call`` is inlined per call site; a slice's gradient is a pad with a new axis and a step (dilation)."""
    C, D, N = ng.make_axis(4, "C"), ng.make_axis(7, "D"), ng.make_axis(3, "N")
    x, z = ng.placeholder([C, N], name="x"), ng.placeholder([C, D], name="z")
    p = ng.placeholder([C, N])
    body = ng.graph([p], [ng.tanh(p) * 2.0, ng.exp(-p)])
    first, second = ng.call(body, x)
    again = ng.call(body, x * 3.0)[0]
    grad = ng.deriv(ng.sum(ng.square(ng.tensor_slice(z, [1, slice(1, 7, 3)]))), z)
    tops = ng.cast(ng.topk(x, C, 2)[1], "float32")
    outputs = [first, second, again, _clipped(x), ng.sequential([ng.exp(x), x + 1.0]), grad,
               ng.cumsum(x, C, exclusive=True, reverse=True), tops]
    proto = export(([x, z], outputs))
    rng = np.random.default_rng(8)
    feeds = [rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 7)).astype(np.float32)]
    ours = run_ours([x, z], outputs, feeds)
    assert np.count_nonzero(ours[5]) == 2  # the gradient really is a pad of 2 values into [C:4, D:7]
    check_outputs(proto, [x, z], outputs, feeds, ours)


# -- the batch axis, files and errors --------------------------------------------------------------------


def test_a_reshape_that_merges_the_batch_axis_falls_back_to_a_static_batch() -> None:
    C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")
    x = ng.placeholder([C, N], name="x")
    y = ng.flatten(x, [C, N]) * 2.0  # [C_N:12]: the batch length is baked into the shape
    with pytest.warns(ExportWarning, match="static batch of 4"):
        proto = export(([x], [y]))
    assert dims(proto) == [4, 3]
    feed = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(run_onnx(proto, {"x": feed.T})[0], feed.reshape(-1) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dims(export(([x], [y]), dynamic_batch=False)) == [4, 3]  # asked for: no warning


def _ctc_graph() -> tuple[list[ng.Op], list[ng.Op]]:
    C, T, N = ng.make_axis(4, "C"), ng.make_axis(5, "REC"), ng.make_axis(2, "N")
    logits = ng.placeholder([C, T, N], name="logits")
    with ng.name_scope("Loss", kind="CTC"):
        loss = ng.ctc_loss(logits, np.ones((2, 2), np.int32), np.full(2, 5, np.int32), np.full(2, 2, np.int32))
    return [logits], [loss]


def test_an_op_without_an_onnx_form_raises_naming_it_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ctc.onnx"
    with pytest.raises(ExportError, match=r"ctc\(.*scope Loss.*hint:"):
        export(_ctc_graph(), path)
    assert list(tmp_path.iterdir()) == []  # no file, no temporary left behind
    path.write_bytes(b"old model")
    with pytest.raises(ExportError):
        export(_ctc_graph(), path)
    assert path.read_bytes() == b"old model"  # a failed export leaves the old file whole


def test_bad_sources_options_and_names_raise_export_errors() -> None:
    C, N = ng.make_axis(2, "C"), ng.make_axis(2, "N")
    x, w = ng.placeholder([C, N], name="x"), ng.variable([C], initial_value=1.0)
    cases: list[Callable[[], object]] = [
        lambda: export("not a model"),
        lambda: export(([x], [x + 1.0]), opset=9),
        lambda: export(([x], [x + 1.0]), input_names=["a", "b"]),
        lambda: export(([ng.exp(x)], [x + 1.0])),
        lambda: export(([], [x + 1.0])),  # reads a placeholder that is not an input
        lambda: export(([x], [x + 1.0]), batch_size=0),
        lambda: export(([x], [x + 1.0]), layout="NCHW"),
        lambda: export(([x], [x * ng.uniform([C, N])])),  # random ops: only in training graphs
        lambda: export(([x], [ng.sequential([ng.assign(w, w + 1.0), x * w])])),  # a training step writes
    ]
    for case in cases:
        with pytest.raises(ExportError, match="hint:"):
            case()
