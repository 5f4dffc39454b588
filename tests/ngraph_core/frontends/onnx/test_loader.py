"""Hostile ONNX input: every malformed, truncated or mutated file ends in a typed error, never a crash.

The contract (as for checkpoints and serialized graphs): ``import_model`` given bytes returns
an ``ImportedModel`` or raises an ``NgraphError`` subclass (``OnnxLoadError``, ``OnnxError``,
``UnsupportedOnnxOpError``...) — never a protobuf ``DecodeError``, a ``KeyError``, a NumPy
error or a segfault.
"""

from __future__ import annotations

import numpy as np
import pytest
from fuzzing import corpus, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ngraph_core as ng  # noqa: E402
from ngraph_core.frontends.onnx import (  # noqa: E402
    OnnxError,
    OnnxLoadError,
    UnsupportedOnnxOpError,
    import_model,
)


def small_model(op: str = "Relu", opset: int = 17) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"), helper.make_node(op, ["h"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "small", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


GOOD = small_model().SerializeToString()


def conv_model() -> onnx.ModelProto:
    """Conv, BatchNormalization, Relu, MaxPool, Reshape (static shape), Gemm, Transpose, Softmax: attributes of
    every kind (ints, floats, lists) and integer initializers for the mutations to damage."""
    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"], name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "Wf", "bf"], ["g1"], name="fc", transB=1, alpha=1.0),
        helper.make_node("Transpose", ["g1"], ["t"], name="tr", perm=[1, 0]),
        helper.make_node("Softmax", ["t"], ["y"], name="sm", axis=0),
    ]
    inits = [init("W", 4, 2, 3, 3), init("B", 4), init("g", 4), init("b", 4), init("m", 4),
             numpy_helper.from_array(np.linspace(0.5, 1.5, 4, dtype=np.float32), "v"),
             numpy_helper.from_array(np.array([2, 16], np.int64), "shape"), init("Wf", 3, 16), init("bf", 3)]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CONV = conv_model().SerializeToString()


def import_or_typed_error(data: bytes) -> None:
    try:
        model = import_model(data, dims={"N": 2})
    except ng.NgraphError:
        return
    # an accepted model also runs, fed what its placeholders declare (a mutation may change an input's type or rank)
    out = model.run([np.ones(p.axes.lengths, p.dtype) for p in model.inputs])
    assert all(isinstance(o, np.ndarray) for o in out)


def test_good_model_imports_and_runs():
    model = import_model(GOOD, dims={"N": 2})
    (y,) = model.run([np.array([[1, 0, 0], [0, 1, -1]], np.float32)])
    np.testing.assert_array_equal(y, [[0, 1], [0, 0]])


@pytest.mark.parametrize("data", [b"", b"\x00", b"not an onnx model at all", b"\xff" * 64])
def test_garbage_bytes_are_a_load_error(data):
    with pytest.raises(OnnxLoadError):
        import_model(data)


def test_every_truncation_is_a_typed_error():
    for n in range(len(GOOD)):
        import_or_typed_error(GOOD[:n])


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(OnnxLoadError, match="cannot read"):
        import_model(tmp_path / "missing.onnx")
    with pytest.raises(OnnxLoadError, match="cannot read"):
        import_model(tmp_path)


def test_a_protobuf_that_is_not_a_model():
    tensor = numpy_helper.from_array(np.ones(3, np.float32), "t").SerializeToString()
    with pytest.raises(OnnxLoadError):
        import_model(tensor)


def test_unsupported_operator_names_op_opset_and_node():
    model = small_model("NoSuchOp")
    model.graph.node[1].domain = "com.example"
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOnnxOpError) as info:
        import_model(model)
    assert (info.value.op_type, info.value.opset, info.value.node) == ("NoSuchOp", 1, "act")
    assert "com.example::NoSuchOp" in str(info.value) and "hint" in str(info.value)


def test_string_input_is_a_clear_error():
    x = helper.make_tensor_value_info("x", TensorProto.STRING, [2])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    with pytest.raises(OnnxError, match="STRING is not supported"):
        import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_a_shape_input_without_its_value_names_the_input():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    s = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "g", [x, s],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxError, match="static_inputs"):
        import_model(model)
    m = import_model(model, static_inputs={"shape": np.array([3, 2])})
    np.testing.assert_array_equal(m.run([np.arange(6, dtype=np.float32).reshape(2, 3)])[0],
                                  np.arange(6).reshape(3, 2))


def test_a_non_utf8_name_is_a_load_error():
    model = small_model()
    data = model.SerializeToString().replace(b"\x1a\x02fc", b"\x1a\x02f\xe4")  # node "fc" -> bytes b"f\xe4"
    with pytest.raises(OnnxLoadError, match=r"the text at model\.graph\.node\[0\]\.name is not valid UTF-8"):
        import_model(data)


def test_a_graph_without_outputs_is_a_load_error():
    model = small_model()
    del model.graph.output[:]
    with pytest.raises(OnnxLoadError, match="the graph declares no outputs"):
        import_model(model)


def test_a_huge_declared_input_is_refused_before_allocating():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**20, "N", 2**20])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**20, "N", 2**20])])
    with pytest.raises(OnnxError, match=r"input 'x': a tensor of shape \(1048576, 1, 1048576\) would hold "
                                        r"1,099,511,627,776 elements, over the limit of 2,147,483,648"):
        import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("op", ["Expand", "Tile"])
def test_a_huge_static_shape_is_refused_naming_the_node(op):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    shape = numpy_helper.from_array(np.array([2**40], np.int64), "s")
    graph = helper.make_graph([helper.make_node(op, ["x", "s"], ["y"], name="grow")], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])], [shape])
    with pytest.raises(OnnxError, match=f"{op} node 'grow': a tensor of shape \\(1099511627776,\\) would hold"):
        import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("path", corpus("onnx_model"), ids=lambda p: p.name)
def test_corpus_inputs_that_once_broke_the_loader(path):
    import_or_typed_error(path.read_bytes())


@st.composite
def mutated(draw, good: bytes = GOOD):
    data = bytearray(good)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        i = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[i] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif len(data) > 1:
            del data[i:i + draw(st.integers(1, 8))]
    return bytes(data)


@pytest.mark.fuzz
@fuzz_settings(150)
@given(mutated())
def test_mutated_bytes_give_a_model_or_a_typed_error(data):
    import_or_typed_error(data)


def test_the_conv_model_imports_and_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(1).standard_normal((2, 2, 4, 4)).astype(np.float32)
    (expected,) = ort.InferenceSession(CONV, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(import_model(CONV).run([x])[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.fuzz
@fuzz_settings(100)
@given(mutated(CONV))
def test_mutated_conv_model_gives_a_model_or_a_typed_error(data):
    import_or_typed_error(data)


@pytest.mark.parametrize("evil", ["a\nimport os; os._exit(3)", 'q"uote\'s', "nul\x00byte", "x\u202eevil"])
def test_hostile_names_never_reach_generated_code(evil):
    """Node, input, output, initializer and dim names with a newline, quotes, NUL or a bidi mark import and
    run; the compiled plan's source holds none of those characters raw."""
    x = helper.make_tensor_value_info(evil + "in", TensorProto.FLOAT, [evil + "N", 3])
    y = helper.make_tensor_value_info(evil + "out", TensorProto.FLOAT, [evil + "N", 2])
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), evil + "W")
    nodes = [helper.make_node("MatMul", [evil + "in", evil + "W"], [evil + "h"], name=evil + "fc"),
             helper.make_node("Relu", [evil + "h"], [evil + "out"], name=evil)]
    model = helper.make_model(helper.make_graph(nodes, evil, [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model.SerializeToString(), dims={evil + "N": 2})
    (out,) = imported.run([np.array([[1, 0, 0], [0, 1, -1]], np.float32)])
    np.testing.assert_array_equal(out, [[0, 1], [0, 0]])
    source = imported.computation().source
    for ch in ("\x00", "\u202e"):
        assert ch not in source
    assert all(not line.lstrip().startswith("import os") for line in source.splitlines())
