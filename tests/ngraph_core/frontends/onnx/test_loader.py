"""Hostile ONNX input: every malformed, truncated or mutated file ends in a typed error, never a crash.

The contract (as for checkpoints and serialized graphs): ``import_model`` given bytes returns
an ``ImportedModel`` or raises an ``NgraphError`` subclass (``OnnxLoadError``, ``OnnxError``,
``UnsupportedOnnxOpError``...) — never a protobuf ``DecodeError``, a ``KeyError``, a NumPy
error or a segfault. Models whose shapes, repeats, sizes, pads, ranges or indices are hostile
(``hostile_model``: a few dozen bytes asking for gigabytes) also stay within the memory budget
(``max_bytes``): refused before allocating, with an ``OnnxBudgetError`` or ``OnnxIndexError``.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from fuzzing import HANG_SECONDS, corpus, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ngraph_core as ng  # noqa: E402
from ngraph_core.frontends.onnx import (  # noqa: E402
    OnnxBudgetError,
    OnnxError,
    OnnxIndexError,
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


def import_or_typed_error(data: bytes, max_bytes: int | None = None) -> ng.NgraphError | None:
    """The typed error ``data`` ended in, or None for a model that imported and ran."""
    try:
        model = import_model(data, dims={"N": 2}, max_bytes=max_bytes)
        # an accepted model also runs, fed what its placeholders declare (a mutation may change an input's type or rank)
        out = model.run([np.ones(p.axes.lengths, p.dtype) for p in model.inputs])
    except ng.NgraphError as exc:
        return exc
    assert all(isinstance(o, np.ndarray) for o in out)
    return None


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
    with pytest.raises(OnnxBudgetError, match=r"input 'x': a tensor of shape \(1048576, 1, 1048576\) would hold "
                                              r"1,099,511,627,776 elements, over the limit of 1,073,741,824"):
        import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("op", ["Expand", "Tile"])
def test_a_huge_static_shape_is_refused_naming_the_node(op):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    shape = numpy_helper.from_array(np.array([2**40], np.int64), "s")
    graph = helper.make_graph([helper.make_node(op, ["x", "s"], ["y"], name="grow")], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])], [shape])
    with pytest.raises(OnnxError, match=f"{op} node 'grow': a tensor of shape \\(1099511627776,\\) would hold"):
        import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


# -- hostile shapes: a few bytes of model asking for gigabytes --------------------------------------------------------

HOSTILE_INTS = [0, 1, -1, 2, 3, 7, 2**20, 2**27, 2**28, 2**29, 2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**62,
                2**63 - 1, -(2**31), -(2**63)]


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _f32(name, *shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


# template -> (how many ints it takes, builder(ints) -> (nodes, graph inputs, initializers)); the ints are the
# shape, repeats, sizes, pads, range, indices or depth that the node reads as a static input
HOSTILE_TEMPLATES = {
    "ConstantOfShape": (3, lambda v: ([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [_ints("s", v)])),
    "Expand": (2, lambda v: ([helper.make_node("Expand", ["x", "s"], ["y"])], [_f32("x", 1)], [_ints("s", v)])),
    "Tile": (2, lambda v: ([helper.make_node("Tile", ["x", "r"], ["y"])], [_f32("x", 1, 2)], [_ints("r", v)])),
    "Reshape": (3, lambda v: ([helper.make_node("Reshape", ["x", "s"], ["y"])], [_f32("x", 2, 3)], [_ints("s", v)])),
    "Range": (3, lambda v: ([helper.make_node("Range", ["a", "b", "c"], ["y"])], [],
                            [_ints(n, x) for n, x in zip("abc", v)])),
    "Pad": (4, lambda v: ([helper.make_node("Pad", ["x", "p"], ["y"])], [_f32("x", 2, 3)], [_ints("p", v)])),
    "Slice": (4, lambda v: ([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])], [_f32("x", 4, 5)],
                            [_ints("s", v[:1]), _ints("e", v[1:2]), _ints("a", [v[2] % 2]), _ints("t", v[3:])])),
    "Gather": (2, lambda v: ([helper.make_node("Gather", ["x", "i"], ["y"])], [_f32("x", 3, 2)], [_ints("i", v)])),
    "OneHot": (1, lambda v: ([helper.make_node("OneHot", ["i", "d", "v"], ["y"])], [],
                             [_ints("i", [0, 1]), _ints("d", v), numpy_helper.from_array(np.array([0, 1], np.float32),
                                                                                        "v")])),
    "Resize": (2, lambda v: ([helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="nearest")],
                             [_f32("x", 1, 1, 2, 2)], [_ints("s", [1, 1, *v])])),
    "TopK": (1, lambda v: ([helper.make_node("TopK", ["x", "k"], ["y", "j"])], [_f32("x", 5)], [_ints("k", v)])),
    "input dims": (2, lambda v: ([helper.make_node("Relu", ["x"], ["y"])], [_f32("x", *v)], [])),
    "EyeLike": (2, lambda v: ([helper.make_node("EyeLike", ["x"], ["y"])], [_f32("x", *v)], [])),
    "two constants": (1, lambda v: ([helper.make_node("ConstantOfShape", ["s"], ["a"]),
                                     helper.make_node("ConstantOfShape", ["s"], ["b"]),
                                     helper.make_node("Add", ["a", "b"], ["y"])], [], [_ints("s", v)])),
    "Expand of a constant": (2, lambda v: ([helper.make_node("ConstantOfShape", ["one"], ["c"]),
                                            helper.make_node("Expand", ["c", "s"], ["y"])], [],
                                           [_ints("one", [1]), _ints("s", v)])),
}


def hostile_model(template: str, ints: list[int]) -> bytes:
    """A one- or three-node model of ``template`` reading ``ints`` (e.g. ConstantOfShape of shape ``ints``)."""
    nodes, inputs, inits = HOSTILE_TEMPLATES[template][1](ints)
    y = helper.make_tensor_value_info("y", TensorProto.INT64 if template == "Range" else TensorProto.FLOAT, [])
    graph = helper.make_graph(nodes, "hostile", inputs, [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@st.composite
def hostile_models(draw):
    template = draw(st.sampled_from(sorted(HOSTILE_TEMPLATES)))
    count = HOSTILE_TEMPLATES[template][0]
    ints = draw(st.lists(st.sampled_from(HOSTILE_INTS) | st.integers(-(2**63), 2**63 - 1), min_size=count,
                         max_size=count))
    return hostile_model(template, ints)


def within_budget(data: bytes, max_bytes: int, hostile: bool = True) -> ng.NgraphError | None:
    """``import_or_typed_error`` under ``max_bytes``: no slower than ``HANG_SECONDS``, Python's peak memory (NumPy's
    arrays included) within a few times the budget (a computed constant, its graph constant and a run's result)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        outcome = import_or_typed_error(data, max_bytes)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - start < HANG_SECONDS
    assert peak <= 4 * max_bytes + (16 << 20), f"{peak:,} bytes under max_bytes={max_bytes:,}"
    assert not (hostile and isinstance(outcome, OnnxLoadError)), outcome  # the hostile value reached the converters
    return outcome


@pytest.mark.fuzz
@fuzz_settings(200)
@given(hostile_models())
def test_hostile_shapes_give_a_model_or_a_typed_error_within_the_budget(data):
    within_budget(data, 8 << 20)


@pytest.mark.parametrize("template", sorted(HOSTILE_TEMPLATES))
@pytest.mark.parametrize("value", [2**29, 2**40, 2**63 - 1, -(2**63)], ids=["2^29", "2^40", "2^63-1", "-2^63"])
def test_each_template_with_a_huge_value_stays_within_the_default_budget(template, value):
    """Every ``ints`` slot at once at a huge value, imported under the default budget (1 GiB): a typed error (or a
    small model: Range(2**29, 2**29, 2**29) is empty) before anything large is allocated."""
    data = hostile_model(template, [value] * HOSTILE_TEMPLATES[template][0])
    tracemalloc.start()
    try:
        outcome = import_or_typed_error(data)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak:,} bytes"
    assert not isinstance(outcome, OnnxLoadError), outcome  # the hostile values reached the converter


def test_constant_of_shape_2_pow_28_is_refused_over_a_budget_before_allocating():
    """The 78-byte model of issue 19: ConstantOfShape [2**28] (1 GiB of float32) imported at 3.1 GiB."""
    data = hostile_model("ConstantOfShape", [2**28])
    assert len(data) < 80
    tracemalloc.start()
    with pytest.raises(OnnxBudgetError, match=r"ConstantOfShape node 'ConstantOfShape_0': expected at most 256\.0 MiB "
                                              r"\(max_bytes=268,435,456\), received 1\.0 GiB \(1,073,741,824 bytes, "
                                              r"shape \(268435456,\) of float32\); hint: .*max_bytes"):
        import_model(data, max_bytes=256 << 20)
    assert tracemalloc.get_traced_memory()[1] < 16 << 20
    tracemalloc.stop()
    assert isinstance(OnnxBudgetError("x"), (MemoryError, OnnxError, ng.MemoryBudgetError))


@pytest.mark.parametrize("template", ["ConstantOfShape", "Expand", "Tile", "Range"])
def test_the_default_budget_refuses_2_pow_29_elements(template):
    ints = {"ConstantOfShape": [2**29], "Expand": [2**29], "Tile": [1, 2**28], "Range": [0, 2**29, 1]}[template]
    with pytest.raises(OnnxBudgetError, match=r"expected at most 1\.0 GiB \(max_bytes=1,073,741,824\), received "
                                              r"(2\.0 GiB|4\.0 GiB)"):
        import_model(hostile_model(template, ints))


def test_the_budget_is_a_keyword_or_an_environment_variable(monkeypatch):
    small = hostile_model("ConstantOfShape", [1 << 16])  # 256 KiB of float32
    assert import_model(small).run([])[0].shape == (1 << 16,)
    with pytest.raises(OnnxBudgetError, match=r"max_bytes=65,536"):
        import_model(small, max_bytes=1 << 16)
    monkeypatch.setenv("NG_MAX_BYTES", "64KiB")
    with pytest.raises(OnnxBudgetError, match=r"max_bytes=65,536"):
        import_model(small)
    assert import_model(small, max_bytes=1 << 20).outputs[0].axes.lengths == (1 << 16,)  # the keyword wins
    monkeypatch.setenv("NG_MAX_BYTES", "lots")
    with pytest.raises(ng.NgraphError, match=r"NG_MAX_BYTES: expected a positive byte count such as 1073741824 or "
                                             r"4GiB, received 'lots'"):
        import_model(small)


def test_constants_computed_at_import_are_budgeted_in_total():
    """Two ConstantOfShape nodes of 40 KiB each fit a 64 KiB budget one at a time, not together; the graph constants
    copied from them (for the Add and the output) and the folded sum count too: 240 KiB in all."""
    data = hostile_model("two constants", [10 << 10])
    with pytest.raises(OnnxBudgetError, match=r"ConstantOfShape node 'ConstantOfShape_1': expected the constants "
                                              r"computed at import time to take at most 64\.0 KiB "
                                              r"\(max_bytes=65,536\), received 80\.0 KiB"):
        import_model(data, max_bytes=64 << 10)
    with pytest.raises(OnnxBudgetError, match=r"Add node 'Add_2': the graph constant of a value computed at import "
                                              r"time: expected .* at most 128\.0 KiB"):
        import_model(data, max_bytes=128 << 10)
    assert import_model(data, max_bytes=240 << 10).run([])[0].shape == (10 << 10,)


def test_a_constant_the_size_of_the_budget_is_refused_when_copied_into_the_graph():
    """Issue 19's 78 bytes asked for 1 GiB and took 3.1 GiB: the value, the graph constant copied from it, a hash's
    copy. The copy counts against the budget, so a value as large as the budget is refused before it is copied
    (the import peaks at about the budget); here at 4 MiB."""
    data = hostile_model("ConstantOfShape", [1 << 20])  # 4 MiB of float32
    tracemalloc.start()
    with pytest.raises(OnnxBudgetError, match=r"graph output 'y': the graph constant of a value computed at import "
                                              r"time: expected .* at most 4\.0 MiB \(max_bytes=4,194,304\), received "
                                              r"8\.0 MiB"):
        import_model(data, max_bytes=4 << 20)
    assert tracemalloc.get_traced_memory()[1] < (4 << 20) + (2 << 20)
    tracemalloc.stop()
    assert import_model(data, max_bytes=8 << 20).outputs[0].axes.lengths == (1 << 20,)


def test_a_long_resize_costs_numpy_time_not_a_python_loop():
    """Resize's weights were a Python loop per output position: sizes of 2**19 took 4 s, 2**26 (within the default
    budget) minutes; now one vectorized pass."""
    start = time.perf_counter()
    model = import_model(hostile_model("Resize", [2**19, 2]), max_bytes=64 << 20)
    assert model.outputs[0].axes.lengths == (1, 1, 2**19, 2) and time.perf_counter() - start < 2.0


@pytest.mark.parametrize("scale", [np.inf, np.nan, 1e30])
def test_non_finite_or_huge_resize_scales_are_typed_errors(scale):
    nodes = [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([1, 1, scale, 1],
                                                                                              np.float32))),
             helper.make_node("Resize", ["x", "", "k"], ["y"], mode="linear")]
    graph = helper.make_graph(nodes, "g", [_f32("x", 1, 1, 2, 2)], [_f32("y")])
    with pytest.raises(OnnxError, match=r"Resize node 'Resize_1': (OverflowError|ValueError|expected at most)"):
        import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_gather_with_static_indices_out_of_range_is_an_index_error():
    with pytest.raises(OnnxIndexError, match=r"Gather node 'Gather_0': index 5 at position \(1,\) of the indices is "
                                             r"out of range for dim 0 of length 3; expected indices in \[-3, 3\)"):
        import_model(hostile_model("Gather", [0, 5]))
    assert issubclass(OnnxIndexError, (IndexError, ng.IndexRangeError, OnnxError))


@pytest.mark.parametrize("path", corpus("onnx_model"), ids=lambda p: p.name)
def test_corpus_inputs_that_once_broke_the_loader(path):
    within_budget(path.read_bytes(), 64 << 20, hostile=False)


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
