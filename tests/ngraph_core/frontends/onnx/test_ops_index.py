"""ONNX indexing converters (ops_index.py) against onnxruntime.

Beyond the node suite: Slice's attribute form (opset < 10) and clamping with negative
steps, Gather with scalar and run-time negative indices (and out-of-range ones raising as in
onnxruntime), the scatters' reductions on other axes, Compress/NonZero/Unique with static data
(and the typed error when it is not).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from ort_check import check_node, make_model
from test_ops_shape import malformed

import ngraph_core as ng
from ngraph_core.frontends.onnx import OnnxError, OnnxIndexError, UnsupportedOnnxOpError, import_model
from ngraph_core.transformers import make_transformer

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 5, 6)).astype("float32")


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, -4], [3, 100], [0, 2], [1, 2]),
    ([-1], [-100], [1], [-2]),
    ([5, 0], [0, 2], [2, 0], [-1, 1]),
    ([0], [9223372036854775807], [-1], [3]),
    ([2], [2], [0], [1]),
])
def test_slice_inputs_with_clamping_and_negative_steps(starts, ends, axes, steps):
    static = {n: np.array(v, "int64") for n, v in zip(("s", "e", "a", "t"), (starts, ends, axes, steps))}
    check_node("Slice", {"x": X}, opset=13, static=static, expected=_numpy_slice(X, starts, ends, axes, steps))


def test_slice_attributes_before_opset_10():
    check_node("Slice", {"x": X}, opset=9, starts=[1, 2], ends=[-1, 1000], axes=[1, 2],
               expected=X[:, 1:-1, 2:])
    check_node("Slice", {"x": X}, opset=1, starts=[0, 1], ends=[2, 3], expected=X[0:2, 1:3])


def _numpy_slice(x, starts, ends, axes, steps):
    index = [slice(None)] * x.ndim
    for s, e, a, t in zip(starts, ends, axes, steps):
        index[a] = slice(s, e, t)
    return x[tuple(index)]


@pytest.mark.parametrize("indices, axis", [
    (np.array(2, "int64"), 1),
    (np.array([[0, -1], [3, 1]], "int64"), 0),
    (np.array([-6, 5, 0], "int32"), 2),
])
def test_gather_static_and_runtime_indices(indices, axis):
    expected = np.take(X, indices, axis=axis)
    check_node("Gather", {"x": X}, opset=13, static={"i": indices}, axis=axis, expected=expected)
    check_node("Gather", {"x": X, "i": indices}, opset=13, axis=axis, expected=expected)


@pytest.mark.parametrize("indices", [[0, 4], [-5, 1], [2, 100], [-6, 0]], ids=["4", "-5", "100", "-6"])
def test_gather_out_of_range_indices_raise_like_onnxruntime(indices):
    """Indices outside [-n, n) are an error (onnxruntime raises too), never rows of zeros: a typed error at import
    when they are static, an IndexRangeError naming the node, the index and the range when fed at run time."""
    ort = pytest.importorskip("onnxruntime")
    indices = np.array(indices, "int64")
    model = make_model("Gather", {"x": X, "i": indices}, 13, axis=1)
    in_range = bool(((indices >= -5) & (indices < 5)).all())
    try:
        expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": X, "i": indices})[0]
    except Exception:  # onnxruntime's InvalidArgument: out of data bounds
        expected = None
    assert (expected is not None) == in_range
    imported = import_model(model)
    if in_range:
        np.testing.assert_array_equal(imported.run([X, indices])[0], expected)
        return
    bad = int(indices[(indices < -5) | (indices >= 5)][0])
    with pytest.raises(ng.IndexRangeError, match=rf"\(in Gather_0\): index {bad} at position \(\d,\) of its ids "
                                                 r"is out of range for axis d\d+ of length 5; expected indices in "
                                                 r"\[-5, 5\)"):
        imported.run([X, indices])
    with pytest.raises(OnnxIndexError, match=rf"Gather node 'Gather_0': index {bad} at position \(\d,\) of the "
                                             r"indices is out of range for dim 1 of length 5; expected indices in "
                                             r"\[-5, 5\)"):
        import_model(make_model("Gather", {"x": X}, 13, static={"i": indices}, axis=1))


def test_a_gather_that_raises_still_differentiates_and_round_trips():
    """The ONNX gather (out_of_range="raise") takes negative ids as np.take does, in its gradient too, and keeps
    its mode through ng.serialize (neon's zero-row gather of the same table and ids is another op)."""
    V, E, T = ng.make_axis(5, "V"), ng.make_axis(3, "E"), ng.make_axis(4, "T")
    table = ng.variable([E, V], np.arange(15, dtype="float32").reshape(3, 5))
    ids = ng.constant(np.array([4, -1, 0, -5]), [T], dtype="int64")
    strict, zero = ng.gather(table, ids, V, out_of_range="raise"), ng.gather(table, ids, V)
    assert strict is not zero
    (grad,) = ng.gradients(ng.sum(strict), [table])
    (loaded,) = ng.deserialize(ng.serialize(strict))
    with make_transformer() as t:
        value, dtable, again = t.computation([strict, grad, loaded])()
    np.testing.assert_array_equal(value, np.take(np.arange(15).reshape(3, 5), [4, -1, 0, -5], axis=1))
    np.testing.assert_array_equal(dtable, np.tile([2, 0, 0, 0, 2], (3, 1)))
    np.testing.assert_array_equal(again, value)
    with pytest.raises(ng.NgraphError, match="out_of_range 'zero' or 'raise'"):
        ng.gather(table, ids, V, out_of_range="clip")


def test_an_imported_gather_exports_as_a_plain_gather_that_still_raises():
    """Exported again, the ONNX gather (out_of_range="raise") is one Gather node: onnxruntime checks its range."""
    ort = pytest.importorskip("onnxruntime")
    from ngraph_core.frontends.onnx import export

    indices = np.array([-1, 2], "int64")
    imported = import_model(make_model("Gather", {"x": X, "i": indices}, 13, axis=1))
    proto = export((imported.inputs, imported.outputs), opset=13, dynamic_batch=False, input_names=["x", "i"])
    assert [n.op_type for n in proto.graph.node if n.op_type in ("Gather", "Where")] == ["Gather"]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"x": X, "i": indices})[0], np.take(X, indices, axis=1))
    with pytest.raises(Exception, match="out of data bounds"):
        session.run(None, {"x": X, "i": np.array([0, 5], "int64")})


def test_gather_elements_and_scatter_elements_on_the_last_axis():
    indices = RNG.integers(-6, 6, (4, 5, 3)).astype("int64")
    check_node("GatherElements", {"x": X, "i": indices}, opset=13, axis=-1)
    updates = RNG.standard_normal((4, 5, 3)).astype("float32")
    unique = np.broadcast_to(np.array([0, 5, -2], "int64"), (4, 5, 3)).copy()  # distinct: "none" is well defined
    check_node("ScatterElements", {"x": X, "i": unique, "u": updates}, opset=13, axis=2)
    for reduction in ("add", "mul", "max", "min"):
        check_node("ScatterElements", {"x": X, "i": indices, "u": updates}, opset=18, axis=-1, reduction=reduction)


def test_deprecated_scatter_is_scatter_elements():
    x = np.zeros((3, 3), "float32")
    indices = np.array([[1, 0, 2], [0, 2, 1]], "int64")
    updates = np.array([[1, 2, 3], [4, 5, 6]], "float32")
    expected = np.array([[4, 2, 0], [1, 0, 6], [0, 5, 3]], "float32")
    check_node("Scatter", {"x": x, "i": indices, "u": updates}, opset=9, expected=expected)


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_and_scatter_nd(batch_dims):
    indices = np.array([[[1, 2], [3, -1]], [[0, 0], [2, 4]], [[1, 1], [0, 3]], [[3, 3], [2, 2]]], "int64")
    if batch_dims:
        indices = indices[..., :1]
    check_node("GatherND", {"x": X, "i": indices}, opset=13, batch_dims=batch_dims)
    if not batch_dims:
        flat = np.array([[1, 2], [3, 4], [0, 0]], "int64")
        updates = RNG.standard_normal((3, 6)).astype("float32")
        check_node("ScatterND", {"x": X, "i": flat, "u": updates}, opset=13)
        check_node("ScatterND", {"x": X, "i": np.concatenate([flat, flat]), "u": np.concatenate([updates] * 2)},
                   opset=16, reduction="add")


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress_with_a_static_condition(axis):
    condition = np.array([True, False, True, True, False, True][: X.shape[axis] if axis is not None else 6])
    attrs = {} if axis is None else {"axis": axis}
    check_node("Compress", {"x": X}, opset=11, static={"c": condition}, **attrs)


def test_nonzero_and_unique_of_static_data():
    data = np.array([[0, 2, 0], [3, 0, 3]], "int64")
    check_node("NonZero", {}, opset=13, static={"x": data}, expected=np.array(np.nonzero(data), "int64"))
    values = np.array([2, 1, 1, 3, 4, 3], "float32")
    for is_sorted in (0, 1):
        check_node("Unique", {}, opset=11, static={"x": values}, n_outputs=4, sorted=is_sorted)
    check_node("Unique", {}, opset=11, static={"x": np.array([[1, 0], [1, 0], [2, 3]], "int64")}, n_outputs=4,
               axis=0)


def test_nonzero_of_a_graph_input_is_unsupported_even_when_fed():
    # its output shape depends on the input's values: a graph input (even fed as a constant) would have
    # NumPy compute the node at import time instead of the compiled graph, so only model constants are taken
    model = make_model("NonZero", {"x": np.ones((2, 2), "float32")}, 13)
    for fed in (None, {"x": np.eye(2, dtype="float32")}):
        with pytest.raises(UnsupportedOnnxOpError, match="depends on a graph input"):
            import_model(model, static_inputs=fed)


def test_slice_with_mismatched_lengths_names_the_node():
    model = malformed("Slice", {"x": X}, 13, static={"s": np.array([0, 1], "int64"), "e": np.array([2], "int64")})
    with pytest.raises(OnnxError, match="one length"):
        import_model(model)


@pytest.mark.parametrize("mode, axis", [("linear", -2), ("circular", 2), ("linear", 1)])
def test_tensor_scatter_with_runtime_write_indices(mode, axis):
    cache = RNG.standard_normal((2, 3, 5, 4)).astype("float32")
    update_shape = list(cache.shape)
    update_shape[axis] = 2
    update = RNG.standard_normal(update_shape).astype("float32")
    # linear writes stay inside the cache; circular ones from position 4 of 5 wrap to 4, 0
    starts = np.array([4, 0] if mode == "circular" else [1, 3 if axis != 1 else 1], "int64")
    expected = cache.copy()
    for b in range(2):
        for s in range(2):
            index = [b, slice(None), slice(None), slice(None)]
            index[axis % 4] = (starts[b] + s) % cache.shape[axis]
            source = [b, slice(None), slice(None), slice(None)]
            source[axis % 4] = s
            expected[tuple(index)] = update[tuple(source)]
    check_node("TensorScatter", {"cache": cache, "update": update, "w": starts}, opset=24, mode=mode, axis=axis,
               expected=expected)


def test_array_feature_extractor_in_the_ml_domain():
    x = RNG.standard_normal((3, 5)).astype("float32")
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 3)])
    (got,) = import_model(model).run({"x": x, "i": np.array([4, 1], "int64")})
    np.testing.assert_array_equal(got, x[:, [4, 1]])
