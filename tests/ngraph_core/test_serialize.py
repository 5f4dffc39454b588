"""Tests of ``ng.serialize`` / ``ng.deserialize``: a round trip per OpType, meta, fresh uids, bad documents."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pytest
from extra_op_cases import serialize_graphs
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ngraph_core as ng
from ngraph_core.errors import SerializationError
from ngraph_core.ir import ARG_TYPES, Op, OpType

C, H, N = ng.make_axis(3, "C"), ng.make_axis(4, "H"), ng.make_axis(2, "N")


@ng.custom_gradient
def clip_grad(x: Op) -> tuple[Op, Callable]:
    """Identity forward; the gradient is clipped to [-1, 1]."""
    return x * 1.0, lambda ctx: [ng.minimum(ng.maximum(ctx, -1.0), 1.0)]


def _x(name: str = "X", axes: tuple = (C, N)) -> Op:
    return ng.placeholder(list(axes), name=name)


def _unary(fn: Callable[[Op], Op]) -> Callable[[], tuple[list[Op], list[Op]]]:
    return lambda: ([fn(x := _x())], [x])


def _binary(fn: Callable[[Op, Op], Op]) -> Callable[[], tuple[list[Op], list[Op]]]:
    return lambda: ([fn(x := _x(), y := _x("Y", (N,)))], [x, y])


def _variable() -> tuple[list[Op], list[Op]]:
    w0 = ng.variable([C], initial_value=0.25, name="w0")
    w1 = ng.variable([C], initial_value=np.array([1.0, -2.0, 3.0]), name="w1")
    w2 = ng.variable([C, N], initial_value=lambda axes: np.arange(axes.size).reshape(axes.lengths), name="w2")
    w3 = ng.variable([N], initial_value=3, dtype="int32", name="w3")
    x = _x()
    return [ng.dot(w0 + w1, x * w2) + ng.cast(w3, "float32")], [x]


def _assign() -> tuple[list[Op], list[Op]]:
    v, x = ng.variable([N], initial_value=0.5, name="v"), _x()
    return [ng.assign(v, v + ng.sum(x, reduction_axes=[C]))], [x]


def _sequential() -> tuple[list[Op], list[Op]]:
    v, x = ng.variable([N], initial_value=1.0, name="v"), _x()
    return [ng.sequential([ng.assign(v, v * 3.0), v + ng.sum(x, reduction_axes=[C])])], [x]


def _doall() -> tuple[list[Op], list[Op]]:
    v, u, x = ng.variable([N], 1.0, name="v"), ng.variable([C], 2.0, name="u"), _x()
    return [ng.doall([ng.assign(v, ng.sum(x, reduction_axes=[C])), ng.assign(u, u * u)])], [x]


def _concat() -> tuple[list[Op], list[Op]]:
    x, z = _x(), _x("Z", (ng.make_axis(2, "C"), N))
    return [ng.concat_along_axis([x, z], C)], [x, z]


def _reshape() -> tuple[list[Op], list[Op]]:
    x = _x("X3", (C, H, N))
    return [ng.flatten(x)], [x]


def _image() -> Op:
    return _x("image", (C, H, ng.make_axis(5, "W"), N))


def _filter(k: int = 4) -> Op:
    R, S, K = ng.make_axis(3, "R"), ng.make_axis(2, "S"), ng.make_axis(k, "K")
    return ng.variable([C, R, S, K], initial_value=lambda axes: np.linspace(-1, 1, axes.size).reshape(axes.lengths),
                       name="filter")


def _conv_grad(which: int) -> tuple[list[Op], list[Op]]:
    x, w = _image(), _filter()
    y = ng.convolution(x, w, strides=(1, 2), padding=((1, 0), 1), dilation=(2, 1))
    return [ng.gradients(ng.sum(y * y), [x, w])[which]], [x]


def _deconvolution() -> tuple[list[Op], list[Op]]:
    x = _x("image", (ng.make_axis(4, "K"), H, ng.make_axis(5, "W"), N))
    return [ng.deconvolution(x, _filter(), strides=2, padding=(1, 0), output_padding=(1, 0))], [x]


def _scan(grad: bool) -> tuple[list[Op], list[Op]]:
    x, h0 = _x("x", (C, ng.make_axis(3, "REC"), N)), _x("h0")
    w = ng.variable([C], initial_value=np.array([0.5, -1.0, 0.25]), name="w")  # read inside the step: lifted
    lengths = ng.constant(np.array([3, 1], dtype=np.int32), [N], dtype="int32")
    (h,), (ys,) = ng.scan(lambda x_t, h: ([h * x_t], [ng.tanh(x_t * w + h)]), [x], [h0], x.axes[1], reverse=True,
                          lengths=lengths)
    loss = ng.sum(ys) + ng.sum(h * h)
    return (ng.gradients(loss, [x, h0, w]) if grad else [h, ys]), [x, h0]


def _ctc(grad: bool) -> tuple[list[Op], list[Op]]:
    x = _x("logits", (C, ng.make_axis(6, "REC"), N))
    labels = ng.constant(np.array([[1, 2], [1, 0]], dtype=np.int32), [ng.make_axis(2, "L"), N], dtype="int32")
    lengths = [ng.constant(np.array(v, dtype=np.int32), [N], dtype="int32") for v in ([6, 4], [2, 1])]
    loss = ng.ctc_loss(x, labels, *lengths, blank=0, zero_infinity=True)
    return [ng.gradients(ng.sum(loss * loss), [x])[0] if grad else loss], [x]


def _lookup(grad: bool) -> tuple[list[Op], list[Op]]:
    table = _x("table", (C, ng.make_axis(5, "V")))
    ids = ng.constant(np.array([[4, 0, 4], [-1, 2, 5]]), [N, ng.make_axis(3, "T")], dtype="int64")
    y = ng.gather(table, ids, "V")  # [C, N, T]
    return [ng.gradients(ng.sum(y * y), [table])[0] if grad else y], [table]


def _pool_grad(op: str) -> tuple[list[Op], list[Op]]:
    x = _image()
    y = ng.pooling(x, (3, 2), op=op, strides=(2, 1), padding=1, ceil_mode=True, count_include_pad=False)
    return [ng.gradients(ng.sum(y * y), [x])[0]], [x]


# OpType -> a builder of (results, placeholders) through the public API; placeholders are fed positive floats.
GRAPHS: dict[OpType, Callable[[], tuple[list[Op], list[Op]]]] = {
    OpType.CONSTANT: _unary(lambda x: x * ng.constant(np.arange(6.0).reshape(3, 2), [C, N]) + ng.constant(2)),
    OpType.VARIABLE: _variable,
    OpType.PLACEHOLDER: lambda: ([x := _x()], [x]),
    OpType.UNIFORM: _unary(lambda x: x + ng.uniform([C, N], -1.0, 2.0, seed=3)),
    OpType.NORMAL: _unary(lambda x: x * ng.normal([N], 0.5, 2.0, seed=7, name="noise")),
    OpType.NEG: _unary(ng.negative), OpType.ABS: _unary(ng.absolute), OpType.EXP: _unary(ng.exp),
    OpType.LOG: _unary(ng.log), OpType.LOG1P: _unary(ng.log1p), OpType.SQRT: _unary(ng.sqrt),
    OpType.RSQRT: _unary(ng.rsqrt), OpType.SQUARE: _unary(ng.square), OpType.RECIPROCAL: _unary(ng.reciprocal),
    OpType.TANH: _unary(ng.tanh), OpType.SIGMOID: _unary(ng.sigmoid), OpType.RELU: _unary(ng.relu),
    OpType.SIGN: _unary(lambda x: ng.sign(x - 1.0)), OpType.SIN: _unary(ng.sin), OpType.COS: _unary(ng.cos),
    OpType.STOP_GRADIENT: _unary(ng.stop_gradient), OpType.CAST: _unary(lambda x: ng.cast(x * 10.0, "int32")),
    OpType.ADD: _binary(ng.add), OpType.SUB: _binary(ng.subtract), OpType.MUL: _binary(ng.multiply),
    OpType.DIV: _binary(ng.divide), OpType.POW: _binary(ng.power), OpType.MAXIMUM: _binary(ng.maximum),
    OpType.MINIMUM: _binary(ng.minimum), OpType.EQUAL: _binary(lambda x, y: ng.equal(x, x * 1.0 + y * 0.0)),
    OpType.NOT_EQUAL: _binary(ng.not_equal), OpType.LESS: _binary(ng.less),
    OpType.LESS_EQUAL: _binary(ng.less_equal), OpType.GREATER: _binary(ng.greater),
    OpType.GREATER_EQUAL: _binary(ng.greater_equal),
    OpType.WHERE: _binary(lambda x, y: ng.where(ng.greater(x, 1.0), x, y)),
    OpType.SUM: _unary(lambda x: ng.sum(x, reduction_axes=[N])), OpType.MAX: _unary(lambda x: ng.max(x)),
    OpType.MIN: _unary(lambda x: ng.min(x, out_axes=[N])), OpType.PROD: _unary(lambda x: ng.prod(x)),
    OpType.ARGMAX: _unary(lambda x: ng.argmax(x, reduction_axes=[C])),
    OpType.ARGMIN: _unary(lambda x: ng.argmin(x, reduction_axes=[N])),
    OpType.BROADCAST: _unary(lambda x: ng.broadcast(x, [H, N, C])),
    OpType.CAST_AXES: _unary(lambda x: ng.cast_axes(x, [ng.make_axis(3, "D"), N])),
    OpType.RESHAPE: _reshape,
    OpType.SLICE: _unary(lambda x: ng.tensor_slice(x, [slice(None, None, -2), 1]) + ng.tensor_slice(x, [0, 1])),
    OpType.PAD: _unary(lambda x: ng.pad(x, [(1, 2), 0])),
    OpType.CONCAT: _concat,
    OpType.GATHER: lambda: _lookup(False),
    OpType.SCATTER_ADD: lambda: _lookup(True),
    OpType.DOT: _binary(ng.dot),
    OpType.BATCH_DOT: lambda: ([ng.batch_dot(x := _x("X", (C, H, N)), y := _x("Y", (C, N)), [N])], [x, y]),
    OpType.ASSIGN: _assign,
    OpType.SEQUENTIAL: _sequential,
    OpType.DOALL: _doall,
    OpType.CUSTOM_GRADIENT: _unary(lambda x: clip_grad(ng.tanh(x))),
    OpType.CALL: _unary(lambda x: ng.call(ng.graph([p := ng.placeholder(x.axes)], ng.tanh(p) * p), x + 1.0)),
    OpType.CONV: lambda: ([ng.convolution(x := _image(), _filter(), padding="same")], [x]),
    OpType.CONV_BPROP_DATA: lambda: _conv_grad(0),
    OpType.CONV_BPROP_FILTER: lambda: _conv_grad(1),
    OpType.POOL: lambda: ([ng.pooling(x := _image(), 2, op="avg", ceil_mode=True)], [x]),
    OpType.POOL_BPROP: lambda: _pool_grad("max"),
    OpType.MOMENTS: _unary(lambda x: ng.moments(x, [C])[1] + ng.moments(x, [C])[0]),
    OpType.CENTERED_SUMS: _unary(lambda x: ng.centered_sums(x * 2.0, x, ng.moments(x, [C])[0])[1]),
    OpType.CTC: lambda: _ctc(False),
    OpType.SCAN: lambda: _scan(False),
    OpType.SCAN_RESULT: lambda: _scan(True),
    OpType.CTC_GRAD: lambda: _ctc(True),
    **serialize_graphs(),  # the ONNX-set element-wise and indexing ops (extra_op_cases.py)
    OpType.ALLREDUCE: _unary(lambda x: ng.distributed.allreduce(x, "sum", bucket_bytes=1024)
                             + ng.distributed.allreduce(x * 2.0)),
    OpType.BROADCAST_FROM: _unary(lambda x: ng.distributed.broadcast(x, root=0)),
}


def _run(results: list[Op], placeholders: list[Op]) -> tuple[list, list[np.ndarray]]:
    """Outputs and then every variable's value, on a fresh NumPy transformer."""
    rng = np.random.default_rng(0)
    feeds = [rng.uniform(0.5, 2.0, p.shape).astype(p.dtype) for p in placeholders]
    with ng.transformers.make_transformer() as t:
        outs = list(t.computation(results, *placeholders)(*feeds))
        return outs, [t.read_variable(v) for v in ng.ordered_ops(results) if v.op is OpType.VARIABLE]


def _assert_same_values(a: tuple[list, list], b: tuple[list, list]) -> None:
    for x, y in zip(a[0] + a[1], b[0] + b[1], strict=True):
        if x is None or y is None:
            assert x is None and y is None
        else:
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


def _round_trip(results: list[Op], placeholders: list[Op]) -> tuple[list[Op], list[Op]]:
    """Serialize, check the text is stable, load; return the loaded (results, placeholders)."""
    text = ng.serialize([*results, *placeholders])
    loaded = ng.deserialize(text)
    assert ng.serialize(loaded) == text
    return loaded[:len(results)], loaded[len(results):]


# Ops only the compiler makes (``fused``) are not part of the graph format: serialize before compiling.
COMPILER_ONLY = getattr(ng.OpGroup, "COMPILED", frozenset())
USER_OPS = [t for t in OpType if t not in COMPILER_ONLY]


def test_every_optype_has_a_graph_and_an_arg_codec() -> None:
    assert set(GRAPHS) == set(USER_OPS), f"add a graph to GRAPHS for {set(USER_OPS) - set(GRAPHS)}"
    assert set(USER_OPS) <= set(ARG_TYPES), f"add an arg class for {set(USER_OPS) - set(ARG_TYPES)} to ir/args.py"


@pytest.mark.parametrize("kind", sorted(COMPILER_ONLY, key=lambda t: t.value), ids=lambda t: t.value)
def test_compiler_only_ops_are_refused(kind: OpType) -> None:
    x = _x()
    with pytest.raises(SerializationError, match="serialize the graph before compiling it"):
        ng.serialize(Op(kind, [x], x.axes, x.dtype, ("compiled",)))
    record = {"arg": None, "axes": [], "dtype": "float32", "meta": {"labels": [], "name": None, "scope": []},
              "op": kind.value, "src": []}
    with pytest.raises(SerializationError, match="expected an op name"):
        ng.deserialize(json.dumps({"format_version": 1, "ops": [record], "roots": [0]}))


@pytest.mark.parametrize("kind", USER_OPS, ids=lambda t: t.value)
def test_round_trip_text_per_optype(kind: OpType) -> None:
    results, placeholders = GRAPHS[kind]()
    assert kind in {o.op for o in ng.ordered_ops(results)}, f"the graph for {kind} does not contain it"
    loaded, loaded_placeholders = _round_trip(results, placeholders)
    assert [p.name for p in loaded_placeholders] == [p.name for p in placeholders]
    assert [o.op for o in ng.ordered_ops(loaded)] == [o.op for o in ng.ordered_ops(results)]


@pytest.mark.parametrize("kind", USER_OPS, ids=lambda t: t.value)
def test_round_trip_values_per_optype(kind: OpType) -> None:
    results, placeholders = GRAPHS[kind]()
    loaded, loaded_placeholders = _round_trip(results, placeholders)
    _assert_same_values(_run(results, placeholders), _run(loaded, loaded_placeholders))


def test_gradient_graph_round_trips() -> None:
    # the gradient of an int-indexed slice is a pad whose arg holds ints (a new output axis)
    x, w = _x(), ng.variable([N], initial_value=np.array([0.5, -1.5]), name="w")
    cost = ng.sum(ng.tanh(ng.tensor_slice(x, [1, slice(None)]) * w) + clip_grad(w) * 2.0)
    grads = ng.gradients(cost, [x, w])
    assert any(o.op is OpType.PAD and isinstance(o.arg[0], int) for o in ng.ordered_ops(grads))
    loaded, loaded_placeholders = _round_trip([cost, *grads], [x])
    _assert_same_values(_run([cost, *grads], [x]), _run(loaded, loaded_placeholders))


def test_training_step_round_trips() -> None:
    F, K = ng.make_axis(5, "F"), ng.make_axis(3, "K")
    x, y = ng.placeholder([F, N], name="X"), ng.placeholder([K, N], name="Y")
    with ng.name_scope("Affine_0", kind="Affine"):
        w = ng.variable([K, F], lambda axes: np.random.default_rng(1).normal(size=axes.lengths), labels=["weight"])
        b = ng.variable([K], 0.0, labels=["bias"])
        logits = ng.dot(w, x) + b
    loss = ng.cross_entropy_multi(ng.softmax(logits), y) / ng.batch_size(logits)
    update = ng.doall([ng.assign(v, v - 0.1 * g) for v, g in zip([w, b], ng.gradients(loss, [w, b]), strict=True)])
    (loaded_loss, loaded_update), (lx, ly) = _round_trip([loss, update], [x, y])
    loaded_w, loaded_b = loaded_loss.variables()
    rng = np.random.default_rng(2)
    batches = [(rng.normal(size=(5, 2)), np.eye(3)[:, rng.integers(0, 3, 2)]) for _ in range(3)]
    with ng.transformers.make_transformer() as t1, ng.transformers.make_transformer() as t2:
        step1, step2 = t1.computation([loss, update], x, y), t2.computation([loaded_loss, loaded_update], lx, ly)
        for xb, yb in batches:
            assert step1(xb, yb)[0] == step2(xb, yb)[0]
        for v1, v2 in [(w, loaded_w), (b, loaded_b)]:
            np.testing.assert_array_equal(t1.read_variable(v1), t2.read_variable(v2))


def test_custom_gradient_is_differentiable_after_loading() -> None:
    x = _x()
    (y,), (loaded_x,) = _round_trip([ng.sum(clip_grad(x * 5.0))], [x])
    _assert_same_values(_run([ng.deriv(ng.sum(clip_grad(x * 5.0)), x)], [x]), _run([ng.deriv(y, loaded_x)], [loaded_x]))


@pytest.mark.parametrize("value", [1, 1.0, True, 0, -7, 2.5, 1e300, math.inf, -math.inf, math.nan],
                         ids=repr)
def test_scalar_constants_keep_their_type_and_value(value: float) -> None:
    dtype = {bool: "bool", int: "int64", float: "float64"}[type(value)]
    (loaded,) = ng.deserialize(ng.serialize(ng.constant(value, dtype=dtype)))
    assert type(loaded.arg) is type(value)
    assert loaded.arg == value or (math.isnan(value) and math.isnan(loaded.arg))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bool", "int8", "int32", "int64", "uint8"])
def test_array_constants_round_trip_bit_exact(dtype: str) -> None:
    array = (np.arange(-6, 6) * 1.7).reshape(3, 4).astype(dtype)
    (loaded,) = ng.deserialize(ng.serialize(ng.constant(array, [C, H], dtype=dtype)))
    assert loaded.arg.array.dtype == array.dtype and loaded.arg.array.tobytes() == array.tobytes()


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=3)))
def test_any_float_array_round_trips(array: np.ndarray) -> None:
    axes = [ng.make_axis(n, f"a{i}") for i, n in enumerate(array.shape)]
    op = ng.constant(array, axes, dtype="float64")
    text = ng.serialize(op)
    (loaded,) = ng.deserialize(text)
    assert loaded is op  # no uid inside: hash-consing finds the live constant
    assert ng.serialize(loaded) == text


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_scalar_round_trips(value: float) -> None:
    (loaded,) = ng.deserialize(ng.serialize(ng.constant(value, dtype="float64")))
    assert math.isnan(value) if math.isnan(loaded.arg) else loaded.arg == value


def test_meta_survives() -> None:
    with ng.name_scope("Sequential"), ng.name_scope("Affine_0", kind="Affine"):
        w = ng.variable([C], initial_value=1.0, name="W", labels=["weight"])
        x = _x()
        y = (ng.dot(w, x) * 2.0).named("out").labeled("z_label", "a_label")
    loaded = ng.deserialize(ng.serialize(y))[0]
    ops, originals = ng.ordered_ops([loaded]), ng.ordered_ops([y])
    for got, want in zip(ops, originals, strict=True):
        assert (got.meta.name, got.meta.scope, got.meta.labels) == (want.meta.name, want.meta.scope, want.meta.labels)
    assert loaded.meta.scope[-1] == ng.ir.ScopeEntry("Affine_0", "Affine") and loaded.name == "out"
    assert json.loads(ng.serialize(y))["ops"][-1]["meta"]["labels"] == ["a_label", "z_label"]


def test_loaded_leaves_are_fresh_ops() -> None:
    w, x = ng.variable([C], 1.0, name="W"), _x()
    r = ng.uniform([N], seed=None)
    text = ng.serialize([w, x, r])
    first, second = ng.deserialize(text), ng.deserialize(text)
    for original, a, b in zip([w, x, r], first, second, strict=True):
        assert a is not original and b is not a
    assert first[0].arg.uid != w.arg.uid and first[2].arg.seed is None


def test_uids_never_reach_the_file() -> None:
    ops = [ng.variable([C], 0.0), ng.variable([C], 1.0), _x(), _x(), ng.normal([N], seed=1), ng.uniform([N])]
    doc = json.loads(ng.serialize(ops))
    args = [r["arg"] for r in doc["ops"]]
    assert [args[0]["id"], args[1]["id"], args[2], args[3], args[4]["id"], args[5]["id"]] == [0, 1, 0, 1, 0, 1]


def test_variable_initial_values_are_materialized() -> None:
    calls = []

    def init(axes: ng.Axes) -> np.ndarray:
        calls.append(axes)
        return np.full(axes.lengths, 4.0)

    ops = [ng.variable([C], 2), ng.variable([C], 2.0), ng.variable([C], np.ones(3)), ng.variable([C], init)]
    loaded = ng.deserialize(ng.serialize(ops))
    assert calls == [ng.Axes([C])]
    assert [type(v.arg.initial_value) for v in loaded] == [int, float, np.ndarray, np.ndarray]
    np.testing.assert_array_equal(loaded[3].arg.initial_value, np.full(3, 4.0))


def test_wrong_shaped_initializer_is_reported() -> None:
    with pytest.raises(SerializationError, match="expected an initial value of shape"):
        ng.serialize(ng.variable([C], lambda axes: np.zeros(5)))


def test_serialize_rejects_non_ops() -> None:
    with pytest.raises(SerializationError, match="expected an Op or a list of Ops"):
        ng.serialize([3])


def test_output_is_deterministic_strict_json() -> None:
    results, placeholders = GRAPHS[OpType.VARIABLE]()
    text = ng.serialize(results)
    assert text == ng.serialize(results)
    doc = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-strict JSON constant {name}"))
    assert doc["format_version"] == 1 and sorted(doc) == ["format_version", "ops", "roots"]
    assert all(sorted(r) == ["arg", "axes", "dtype", "meta", "op", "src"] for r in doc["ops"])


# -- bad documents ---------------------------------------------------------------------------------


def _good_doc() -> dict:
    x = ng.placeholder([C, N], name="X")
    w = ng.variable([C], initial_value=np.ones(3), name="W")
    return json.loads(ng.serialize([ng.dot(w, x + ng.tensor_slice(x, [slice(None, None, -1), slice(0, 2)])), x]))


def _edit(fn: Callable[[dict], object]) -> str:
    doc = _good_doc()
    fn(doc)
    return json.dumps(doc)


def _record(doc: dict, kind: str) -> dict:
    return next(r for r in doc["ops"] if r["op"] == kind)


GOOD = json.dumps(_good_doc())

BAD_DOCUMENTS = {
    "malformed": "{not json",
    "truncated": GOOD[: len(GOOD) // 2],
    "empty": "",
    "not an object": "[1, 2]",
    "non-strict NaN": GOOD.replace('"roots"', '"x": NaN, "roots"'),
    "duplicate key": GOOD.replace('"roots"', '"ops": [], "roots"'),
    "bytes, not str": GOOD.encode("utf-8"),
    "missing version": _edit(lambda d: d.pop("format_version")),
    "future version": _edit(lambda d: d.update(format_version=2)),
    "version as string": _edit(lambda d: d.update(format_version="1")),
    "version as bool": _edit(lambda d: d.update(format_version=True)),
    "missing roots": _edit(lambda d: d.pop("roots")),
    "extra top key": _edit(lambda d: d.update(weights=[])),
    "ops not a list": _edit(lambda d: d.update(ops={})),
    "record not an object": _edit(lambda d: d["ops"].append(3)),
    "missing src": _edit(lambda d: d["ops"][0].pop("src")),
    "unknown op": _edit(lambda d: _record(d, "add").update(op="frobnicate")),
    "op not a string": _edit(lambda d: _record(d, "add").update(op=7)),
    "forward src": _edit(lambda d: d["ops"][0].update(src=[1])),
    "self src": _edit(lambda d: _record(d, "add").update(src=[d["ops"].index(_record(d, "add"))] * 2)),
    "src out of range": _edit(lambda d: _record(d, "add").update(src=[0, 99])),
    "negative src": _edit(lambda d: _record(d, "add").update(src=[-1, 0])),
    "src as bool": _edit(lambda d: _record(d, "add").update(src=[True, 0])),
    "axes not a list": _edit(lambda d: d["ops"][0].update(axes="C")),
    "axis length as string": _edit(lambda d: d["ops"][0].update(axes=[["C", "3"]])),
    "negative axis length": _edit(lambda d: d["ops"][0].update(axes=[["C", -3]])),
    "duplicate axis names": _edit(lambda d: d["ops"][0].update(axes=[["C", 3], ["C", 3]])),
    "axes fail inference": _edit(lambda d: _record(d, "add").update(axes=[["C", 3], ["N", 5]])),
    "dtype fails inference": _edit(lambda d: _record(d, "dot").update(dtype="int32")),
    "wrong src count": _edit(lambda d: _record(d, "add").update(src=[0])),
    "unknown dtype": _edit(lambda d: d["ops"][0].update(dtype="float8")),
    "dtype not a string": _edit(lambda d: d["ops"][0].update(dtype=32)),
    "meta missing labels": _edit(lambda d: d["ops"][0]["meta"].pop("labels")),
    "label not a string": _edit(lambda d: d["ops"][0]["meta"].update(labels=[1])),
    "bad scope entry": _edit(lambda d: d["ops"][0]["meta"].update(scope=[["Affine_0"]])),
    "name not a string": _edit(lambda d: d["ops"][0]["meta"].update(name=5)),
    "root out of range": _edit(lambda d: d.update(roots=[99])),
    "root not an int": _edit(lambda d: d.update(roots=["0"])),
    "arg on an add": _edit(lambda d: _record(d, "add").update(arg=1)),
    "placeholder arg not an int": _edit(lambda d: _record(d, "placeholder").update(arg="a")),
    "variable arg missing id": _edit(lambda d: _record(d, "variable")["arg"].pop("id")),
    "variable value untagged": _edit(lambda d: _record(d, "variable")["arg"].update(initial_value=1.0)),
    "bad base64": _edit(lambda d: _record(d, "variable")["arg"]["initial_value"]["array"].update(data="!!")),
    "short array data": _edit(lambda d: _record(d, "variable")["arg"]["initial_value"]["array"].update(data="AAAA")),
    "array object dtype": _edit(lambda d: _record(d, "variable")["arg"]["initial_value"]["array"].update(dtype="O")),
    "negative shape": _edit(lambda d: _record(d, "variable")["arg"]["initial_value"]["array"].update(shape=[-3])),
    "slice arg not a list": _edit(lambda d: _record(d, "slice").update(arg="0:3")),
    "slice entry wrong width": _edit(lambda d: _record(d, "slice").update(arg=[[0, 3], [0, 2, 1]])),
    "slice index out of range": _edit(lambda d: _record(d, "slice").update(arg=[7, [0, 2, 1]])),
    "slice float bound": _edit(lambda d: _record(d, "slice").update(arg=[[0, 3.0, 1], [0, 2, 1]])),
    "slice zero step": _edit(lambda d: _record(d, "slice").update(arg=[[0, 3, 0], [0, 2, 1]])),
    "float as string": _edit(lambda d: d["ops"].insert(0, {**d["ops"][0], "op": "constant", "arg": {"float": "1"}})),
}


@pytest.mark.parametrize("text", list(BAD_DOCUMENTS.values()), ids=list(BAD_DOCUMENTS))
def test_bad_documents_raise_serialization_error(text: str | bytes) -> None:
    with pytest.raises(SerializationError) as info:
        ng.deserialize(text)
    message = str(info.value)
    assert "expected" in message and "received" in message and "hint:" in message, message


def test_future_version_says_upgrade() -> None:
    with pytest.raises(SerializationError, match="newer ngraph_core"):
        ng.deserialize(BAD_DOCUMENTS["future version"])


def test_good_document_loads() -> None:
    roots = ng.deserialize(GOOD)
    assert [r.op for r in roots] == [OpType.DOT, OpType.PLACEHOLDER]


# -- IR corner cases found while writing serialize.py -----------------------------------------------------------------


def test_negative_zero_constant_keeps_its_sign() -> None:
    zero = ng.constant(0.0, dtype="float64")
    (loaded,) = ng.deserialize(ng.serialize(ng.constant(-0.0, dtype="float64")))
    assert zero is not loaded and math.copysign(1.0, loaded.arg) == -1.0


@pytest.mark.parametrize("kind, arg", [(OpType.CONCAT, "Z"), (OpType.SLICE, ((0, 3, 0), (0, 2, 1)))])
def test_verify_reports_bad_args_as_verify_error(kind: OpType, arg: object) -> None:
    x = _x()
    with pytest.raises(ng.VerifyError):
        ng.verify(Op(kind, [x, x] if kind is OpType.CONCAT else [x], x.axes, x.dtype, arg))


# -- declared sizes: a few characters may declare terabytes (issue 19 item 6) ------------------------------------------


def variable_document(length: int, dtype: str = "float32") -> str:
    """A document of one variable of ``length`` elements, ~250 characters (issue 19: 2**28 took 2 GiB at compile,
    2**40 raised a raw MemoryError)."""
    return ('{"format_version": 1, "ops": [\n{"arg": {"id": 0, "initial_value": {"float": 0.0}}, "axes": [["a", '
            f'{length}]], "dtype": "{dtype}", "meta": {{"labels": ["trainable", "variable"], "name": "v", '
            '"scope": []}, "op": "variable", "src": []}\n], "roots": [0]}\n')


@pytest.mark.parametrize("length, dtype, size", [(2**40, "float32", "4.0 TiB"), (2**29, "float32", "2.0 GiB"),
                                                 (2**28, "float64", "2.0 GiB"), (2**62, "uint8", "4.0 EiB")])
def test_a_declared_size_over_the_budget_is_refused_before_allocating(length: int, dtype: str, size: str) -> None:
    text = variable_document(length, dtype)
    assert len(text) < 260
    with pytest.raises(SerializationError, match=rf"op record 0 \(variable\): expected at most 1\.0 GiB "
                                                 rf"\(max_bytes=1,073,741,824\), received '{size} \([\d,]+ bytes, "
                                                 rf"axes \[{length}\] of {dtype}\)'; hint: .*max_bytes.*NG_MAX_BYTES"):
        ng.deserialize(text)


def test_the_decode_budget_is_a_keyword_or_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    text = variable_document(2**28)  # exactly 1 GiB: within the default budget, refused under a smaller one
    (v,) = ng.deserialize(text)
    assert v.axes.lengths == (2**28,)
    with pytest.raises(SerializationError, match=r"expected at most 1\.0 MiB \(max_bytes=1,048,576\)"):
        ng.deserialize(text, max_bytes=1 << 20)
    monkeypatch.setenv("NG_MAX_BYTES", "1MiB")
    with pytest.raises(SerializationError, match=r"max_bytes=1,048,576"):
        ng.deserialize(text)
    assert ng.deserialize(text, max_bytes=1 << 30)[0].axes.lengths == (2**28,)  # the keyword wins


def test_an_empty_tensor_with_a_huge_axis_is_refused() -> None:
    """NumPy cannot describe np.empty((2**62, 0)): an empty axis is charged as length 1."""
    x = ng.placeholder([ng.make_axis(2**62, "A"), ng.make_axis(0, "Z")], name="x")
    with pytest.raises(SerializationError, match=r"op record 0 \(placeholder\): expected at most 1\.0 GiB"):
        ng.deserialize(ng.serialize(x))


def test_a_raise_gather_round_trips_with_its_mode() -> None:
    table, ids = _x("table", (C, ng.make_axis(5, "V"))), ng.placeholder([N], dtype="int64", name="ids")
    strict = ng.gather(table, ids, "V", out_of_range="raise")
    text = ng.serialize([strict, table, ids])
    assert '"arg": {"axis": "V", "out_of_range": "raise"}' in text
    loaded, _, _ = ng.deserialize(text)
    assert loaded.arg == strict.arg and ng.serialize(ng.deserialize(text)) == text
    for bad in ('{"axis": "V", "out_of_range": "zero"}', '{"axis": "V", "out_of_range": "clip"}', '{"axis": 3}',
                '{"axis": "V\\u0000", "out_of_range": "raise"}'):
        with pytest.raises(SerializationError, match=r"op record \d \(gather\): (arg axis: )?expected"):
            ng.deserialize(text.replace('{"axis": "V", "out_of_range": "raise"}', bad))
