"""ONNX control flow (ops_control.py): Scan, Loop and If against onnxruntime.

The node suite (curated_control.txt) has four plain cases; these cover scan input/output
axes and directions, bodies reading outer values and trainable initializers, Loop as one
scan (static condition), as a masked scan (run-time condition), unrolled (a body that needs
its iteration number at import time, or no trip count), If on a run-time condition
(``where``) and on a static one (one branch imported), and nesting.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from ort_check import assert_same, run_ort

from ngraph_core.frontends.onnx import OnnxError, UnsupportedOnnxOpError, backend, import_model
from ngraph_core.ir import OpType, toposort

RNG = np.random.default_rng(3)
F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def info(name, elem, shape):
    """A value's type; ``shape=None``: untyped (filled in by shape inference)."""
    if shape is None:
        return helper.make_empty_tensor_value_info(name)
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name + "_v"))


def model_of(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "control", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    return model


def compare(model, feeds, **kwargs):
    """Our outputs (import_model) against onnxruntime's; returns the imported model."""
    imported = import_model(model, **kwargs)
    assert_same(imported.run(feeds), run_ort(model, feeds), rtol=1e-5, atol=1e-5)
    return imported


def count(imported, op_type):
    return sum(o.op is op_type for o in toposort(imported.outputs))


def test_scan_axes_and_directions_match_onnxruntime():
    # state s [2, 3]; per step x_t [3] (x scanned along dim 1) and u_t [2] read backwards; s = tanh(s * x_t + W)
    body = helper.make_graph(
        [helper.make_node("Mul", ["s", "x_t"], ["sx"]), helper.make_node("Add", ["sx", "W"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["s_new"]), helper.make_node("ReduceSum", ["s_new"], ["col"], keepdims=0),
         helper.make_node("Add", ["col", "u_t"], ["y_t"])],
        "body", [info("s", F, [2, 3]), info("x_t", F, [3]), info("u_t", F, [3])],
        [info("s_new", F, [2, 3]), info("y_t", F, [3]), info("s2", F, [2, 3])])
    body.node.append(helper.make_node("Identity", ["s_new"], ["s2"]))
    node = helper.make_node("Scan", ["s0", "x", "u"], ["s_T", "ys", "ss"], body=body, num_scan_inputs=2,
                            scan_input_axes=[1, 0], scan_input_directions=[0, 1],
                            scan_output_axes=[1, -1], scan_output_directions=[1, 0])
    weight = numpy_helper.from_array(RNG.standard_normal((2, 3)).astype("float32"), "W")
    model = model_of([node], [info("s0", F, [2, 3]), info("x", F, [3, 4]), info("u", F, [4, 3])],
                     [info("s_T", F, None), info("ys", F, None), info("ss", F, None)], [weight])
    feeds = {"s0": RNG.standard_normal((2, 3)).astype("float32"), "x": RNG.standard_normal((3, 4)).astype("float32"),
             "u": RNG.standard_normal((4, 3)).astype("float32")}
    imported = compare(model, feeds)  # W: a trainable variable read inside the body (lifted into the scan)
    assert count(imported, OpType.SCAN) == 1 and [v.name for v in imported.variables] == ["W"]
    ys, ss = imported.run(feeds)[1:]
    assert ys.shape == (3, 4) and ss.shape == (2, 3, 4)


def loop_body_sum(with_scan_output: bool, cond_node=None):
    """Loop body: y += x * (i + 1) (x an outer value); cond passthrough unless ``cond_node`` computes it."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=F), const("one", np.float32(1.0)),
             helper.make_node("Add", ["fi", "one"], ["k"]), helper.make_node("Mul", ["x", "k"], ["xk"]),
             helper.make_node("Add", ["y", "xk"], ["y_new"])]
    nodes.append(cond_node or helper.make_node("Identity", ["c"], ["c_out"]))
    outputs = [info("c_out", BOOL, []), info("y_new", F, [2])]
    if with_scan_output:
        nodes.append(helper.make_node("Mul", ["y_new", "k"], ["scan_t"]))
        outputs.append(info("scan_t", F, [2]))
    return helper.make_graph(nodes, "loop_body", [info("i", I64, []), info("c", BOOL, []), info("y", F, [2])],
                             outputs)


def test_loop_with_static_trip_count_is_one_scan():
    trips = numpy_helper.from_array(np.array(6, "int64"), "M")
    cond = numpy_helper.from_array(np.array(True), "C")
    node = helper.make_node("Loop", ["M", "C", "y0"], ["y_T", "ys"], body=loop_body_sum(True))
    model = model_of([node], [info("y0", F, [2]), info("x", F, [2])], [info("y_T", F, [2]), info("ys", F, [6, 2])],
                     [trips, cond])
    feeds = {"y0": np.array([1.0, -2.0], "float32"), "x": np.array([0.5, 3.0], "float32")}
    imported = compare(model, feeds)
    assert count(imported, OpType.SCAN) == 1
    y_t, ys = imported.run(feeds)
    np.testing.assert_allclose(y_t, feeds["y0"] + feeds["x"] * 21.0)  # sum of k = 1..6
    assert ys.shape == (6, 2)


def test_loop_with_run_time_condition_is_a_masked_scan():
    # stop once y's first element exceeds 4 (y grows by x * k); at most 10 trips
    cond = [helper.make_node("Gather", ["y_new", "zero"], ["y_first"], axis=0), const("zero", np.int64(0)),
            const("four", np.float32(4.0)), helper.make_node("Less", ["y_first", "four"], ["c_out"])]
    body = loop_body_sum(False)
    del body.node[-1]
    body.node.extend([cond[1], cond[2], cond[0], cond[3]])
    node = helper.make_node("Loop", ["M", "", "y0"], ["y_T"], body=body)
    model = model_of([node], [info("y0", F, [2]), info("x", F, [2])], [info("y_T", F, [2])],
                     [numpy_helper.from_array(np.array(10, "int64"), "M")])
    for x in ([0.5, 1.0], [0.01, 1.0], [5.0, 0.0]):  # stops after 3, runs all 10, stops after 1
        imported = compare(model, {"y0": np.array([0.0, 1.0], "float32"), "x": np.array(x, "float32")})
    assert count(imported, OpType.SCAN) == 1


def test_loop_needing_the_iteration_number_statically_is_unrolled():
    # a Slice by the iteration number needs it at import time (as the node case test_loop11)
    body = helper.make_graph(
        [const("table", np.arange(1, 6, dtype="float32") ** 2), const("one", np.array([1], "int64")),
         helper.make_node("Unsqueeze", ["i", "axes"], ["start"]), const("axes", np.array([0], "int64")),
         helper.make_node("Add", ["start", "one"], ["end"]),
         helper.make_node("Slice", ["table", "start", "end"], ["entry"]),
         helper.make_node("Add", ["y", "entry"], ["y_new"]), helper.make_node("Identity", ["c"], ["c_out"])],
        "body", [info("i", I64, []), info("c", BOOL, []), info("y", F, [1])],
        [info("c_out", BOOL, []), info("y_new", F, [1]), info("y_new2", F, [1])])
    body.node.insert(3, body.node.pop(2))  # the axes constant before its reader
    body.node.append(helper.make_node("Identity", ["y_new"], ["y_new2"]))
    node = helper.make_node("Loop", ["M", "", "y0"], ["y_T", "ys"], body=body)
    model = model_of([node], [info("M", I64, []), info("y0", F, [1])], [info("y_T", F, [1]), info("ys", F, ["M", 1])])
    feeds = {"M": np.array(4, "int64"), "y0": np.array([0.5], "float32")}
    with pytest.raises(OnnxError, match="static_inputs"):
        import_model(model)  # M is a graph input: import_model asks for its value
    imported = import_model(model, static_inputs={"M": feeds["M"]})
    got = imported.run({"y0": feeds["y0"]})
    assert_same(got, run_ort(model, feeds))
    np.testing.assert_allclose(got[0], [0.5 + 1 + 4 + 9 + 16])
    assert count(imported, OpType.SCAN) == 0  # unrolled: four copies of the body
    got = backend.prepare(model).run(feeds)  # the backend bakes M in by itself
    assert_same(list(got), run_ort(model, feeds))


def test_loop_without_trip_count():
    # while y < 10: y = y * 2 (static start: unrolled, condition evaluated at import time)
    body = helper.make_graph(
        [const("two", np.float32(2.0)), const("ten", np.float32(10.0)), helper.make_node("Mul", ["y", "two"], ["y2"]),
         helper.make_node("Less", ["y2", "ten"], ["c_out"])],
        "body", [info("i", I64, []), info("c", BOOL, []), info("y", F, [])],
        [info("c_out", BOOL, []), info("y2", F, [])])
    start = numpy_helper.from_array(np.array(0.75, "float32"), "y0")
    model = model_of([helper.make_node("Loop", ["", "", "y0"], ["y_T"], body=body)], [], [info("y_T", F, [])],
                     [start])
    imported = import_model(model, initializers="constants")
    np.testing.assert_allclose(imported.run([])[0], 12.0)
    assert_same(imported.run([]), run_ort(model, {}))
    dynamic = model_of([helper.make_node("Loop", ["", "", "y0"], ["y_T"], body=body)], [info("y0", F, [])],
                       [info("y_T", F, [])])
    with pytest.raises(UnsupportedOnnxOpError, match="no trip count"):
        import_model(dynamic)


def if_model(cond_source, then_value, else_value, shape=(3,)):
    branch = {}
    for key, value in (("then", then_value), ("else", else_value)):
        branch[key] = helper.make_graph([const("c", value), helper.make_node("Mul", ["x", "c"], [f"{key}_out"])],
                                        f"{key}_body", [], [info(f"{key}_out", F, None)])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch["then"], else_branch=branch["else"])
    inputs = [info("x", F, [3])] + ([info("cond", BOOL, [])] if cond_source is None else [])
    initializers = [] if cond_source is None else [numpy_helper.from_array(np.array(cond_source), "cond")]
    return model_of([node], inputs, [info("y", F, list(shape))], initializers)


def test_if_on_a_run_time_condition_selects_with_where():
    model = if_model(None, np.float32([1, 2, 3]), np.float32(-1.0))
    x = np.array([1.0, -2.0, 0.5], "float32")
    imported = import_model(model)
    assert count(imported, OpType.WHERE) == 1
    for flag in (True, False):
        feeds = {"x": x, "cond": np.array(flag)}
        assert_same(imported.run(feeds), run_ort(model, feeds))


def test_if_on_a_static_condition_imports_one_branch():
    model = if_model(False, np.float32([1, 2, 3]), np.float32([4, 5, 6]))
    imported = compare(model, {"x": np.array([1.0, 2.0, 3.0], "float32")})
    assert count(imported, OpType.WHERE) == 0
    different = if_model(None, np.float32([1, 2, 3]), np.float32([[4, 5, 6], [7, 8, 9]]),
                         shape=("d0", 3))  # the branches' shapes differ
    with pytest.raises(OnnxError, match="static_inputs"):
        import_model(different)
    feeds = {"x": np.array([1.0, 2.0, 3.0], "float32"), "cond": np.array(False)}
    assert_same(list(backend.prepare(different).run(feeds)), run_ort(different, feeds))


def test_if_nested_in_a_scan_body():
    # per step: s = s + x_t if x_t > 0 else s - 1 (a run-time condition inside the body)
    then_b = helper.make_graph([helper.make_node("Add", ["s", "x_t"], ["t_out"])], "then", [], [info("t_out", F, [])])
    else_b = helper.make_graph([const("one", np.float32(1.0)), helper.make_node("Sub", ["s", "one"], ["e_out"])],
                               "else", [], [info("e_out", F, [])])
    body = helper.make_graph(
        [const("zero", np.float32(0.0)), helper.make_node("Greater", ["x_t", "zero"], ["pos"]),
         helper.make_node("If", ["pos"], ["s_new"], then_branch=then_b, else_branch=else_b),
         helper.make_node("Identity", ["s_new"], ["y_t"])],
        "body", [info("s", F, []), info("x_t", F, [])], [info("s_new", F, []), info("y_t", F, [])])
    node = helper.make_node("Scan", ["s0", "x"], ["s_T", "ys"], body=body, num_scan_inputs=1)
    model = model_of([node], [info("s0", F, []), info("x", F, [6])], [info("s_T", F, None), info("ys", F, None)])
    compare(model, {"s0": np.array(0.5, "float32"), "x": np.array([1, -2, 3, -4, 0, 2], "float32")})


def test_scan_8_batched_with_lengths_and_reverse():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s_new"]), helper.make_node("Mul", ["s_new", "x_t"], ["y_t"])],
        "body", [info("s", F, [2]), info("x_t", F, [2])], [info("s_new", F, [2]), info("y_t", F, [2])])
    node = helper.make_node("Scan", ["lens", "s0", "x"], ["s_T", "ys"], body=body, num_scan_inputs=1,
                            directions=[1])
    model = model_of([node], [info("s0", F, [3, 2]), info("x", F, [3, 4, 2])],
                     [info("s_T", F, [3, 2]), info("ys", F, [3, 4, 2])],
                     [numpy_helper.from_array(np.array([4, 1, 3], "int64"), "lens")], opset=8)
    feeds = {"s0": RNG.standard_normal((3, 2)).astype("float32"), "x": RNG.standard_normal((3, 4, 2)).astype("float32")}
    imported = compare(model, feeds)
    assert count(imported, OpType.SCAN) == 3  # one per example (the body is written for one)
    np.testing.assert_array_equal(imported.run(feeds)[1][1, 1:], 0)  # past example 1's length


def test_loop_with_run_time_initial_condition_and_no_scan_outputs():
    node = helper.make_node("Loop", ["M", "C", "y0"], ["y_T"], body=loop_body_sum(False))
    model = model_of([node], [info("C", BOOL, []), info("y0", F, [2]), info("x", F, [2])], [info("y_T", F, [2])],
                     [numpy_helper.from_array(np.array(3, "int64"), "M")])
    imported = import_model(model)  # C stays a run-time input: the running flag starts at C
    for flag in (True, False):
        feeds = {"C": np.array(flag), "y0": np.array([1.0, 2.0], "float32"), "x": np.array([1.0, -1.0], "float32")}
        got = imported.run(feeds)
        assert_same(got, run_ort(model, feeds))
        np.testing.assert_allclose(got[0], [7.0, -4.0] if flag else [1.0, 2.0])
