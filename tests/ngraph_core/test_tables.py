"""Every ``OpType`` has an entry in every table keyed by ``OpType`` (arg class too) and a test in ``test_ops.py``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import test_ops

import ngraph_core as ng
from ngraph_core import OpGroup, OpType
from ngraph_core.autodiff import RULES
from ngraph_core.errors import SerializationError
from ngraph_core.ir import ARG_TYPES, ArrayValue, CodecContext, FusedProgram, Op, walk
from ngraph_core.ir.infer import ARITY, INFER
from ngraph_core.transformers.kernels import BOUND_BY_EXECUTOR, KERNELS

ALL = list(OpType)
KINDS = ("LEAF", "RANDOM", "ELEMENTWISE", "REDUCE", "MOVEMENT", "CONTRACTION", "NN", "CONTROL", "COLLECTIVE",
         "COMPILED")


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_inference_rule(op: OpType) -> None:
    assert op in INFER, f"{op.value}: no axes/dtype rule; hint: add one to ngraph_core/ir/infer.py INFER"
    assert op in ARITY, f"{op.value}: no arity; hint: add one to ngraph_core/ir/infer.py ARITY"


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_kernel(op: OpType) -> None:
    if op in BOUND_BY_EXECUTOR:
        assert op in OpGroup.LEAF, f"{op.value}: only leaves may be bound by the executor"
        return
    assert op in KERNELS, f"{op.value}: no kernel; hint: add one in ngraph_core/transformers/kernels/"


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_gradient_rule(op: OpType) -> None:
    if op in OpGroup.NON_DIFFERENTIABLE:
        # autodiff never calls a rule for these: one would be dead code that looks trusted
        assert op not in RULES, f"{op.value} is non-differentiable but has a gradient rule"
    else:
        assert op in RULES, (
            f"{op.value}: no gradient rule; hint: add one to ngraph_core/autodiff/rules.py, "
            "or put it in OpGroup.NON_DIFFERENTIABLE"
        )


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_in_one_kind_group(op: OpType) -> None:
    kinds = [k for k in KINDS if op in getattr(OpGroup, k, ())]
    assert len(kinds) == 1, f"{op.value} is in kind groups {kinds}; expected exactly one of {KINDS}"


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_op_is_tested(op: OpType) -> None:
    names = test_ops.COVERAGE.get(op)
    assert names, f"{op.value}: no case in tests/ngraph_core/test_ops.py CASES (nor a dedicated test)"
    for name in names:
        base = name.split("[")[0]
        assert callable(getattr(test_ops, base, None)), f"{op.value}: test_ops has no test {base!r}"


def test_case_ids_unique() -> None:
    ids = [c.id for c in test_ops.CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_tables_hold_only_op_types() -> None:
    for name, table in (("INFER", INFER), ("KERNELS", KERNELS), ("RULES", RULES), ("ARITY", ARITY),
                        ("ARG_TYPES", ARG_TYPES)):
        extra = [k for k in table if not isinstance(k, OpType)]
        assert not extra, f"{name} has keys that are not OpType members: {extra}"


# -- args: every OpType names the class that owns its arg (ir/args.py), and each class round-trips ------

@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_arg_type(op: OpType) -> None:
    assert op in ARG_TYPES, f"{op.value}: no arg class; hint: add one to ngraph_core/ir/args.py ARG_TYPES"
    for method in ("check", "to_json", "from_json"):
        assert callable(getattr(ARG_TYPES[op], method, None)), f"{ARG_TYPES[op].__name__} has no {method}"


@ng.custom_gradient
def _clip_grad(x: Op) -> tuple[Op, Callable]:
    """Identity forward; the gradient is clipped to [-1, 1]."""
    return x * 1.0, lambda ctx: [ng.minimum(ng.maximum(ctx, -1.0), 1.0)]


C, H, W, N = ng.make_axis(3, "C"), ng.make_axis(4, "H"), ng.make_axis(5, "W"), ng.make_axis(2, "N")


def _x() -> Op:
    return ng.placeholder([C, N], name="X")


def _image() -> Op:
    return ng.placeholder([C, H, W, N], name="image")


def _filter() -> Op:
    R, S, K = ng.make_axis(3, "R"), ng.make_axis(2, "S"), ng.make_axis(4, "K")
    return ng.variable([C, R, S, K], initial_value=0.5, name="filter")


def _call() -> Op:
    p = ng.placeholder([C, N])
    return ng.call(ng.graph([p], ng.tanh(p) * p), _x() + 1.0)


def _scan_final() -> Op:
    x = ng.placeholder([C, ng.make_axis(2, "REC"), N])
    (h,), _ = ng.scan(lambda x_t, h: ([], [h + x_t]), [x], [_x()], x.axes[1], lengths=ng.placeholder([N], "int32"))
    return h  # a scan_result of the scan op


# one op of every kind of arg, built through the API
ARG_SAMPLES: dict[str, Callable[[], Op]] = {
    "none": lambda: ng.tanh(_x()),
    "constant_float": lambda: ng.constant(2.5),
    "constant_int": lambda: ng.constant(3, dtype="int32"),
    "constant_array": lambda: ng.constant(np.arange(6.0).reshape(3, 2), [C, N]),
    "variable": lambda: ng.variable([C], initial_value=np.array([1.0, -2.0, 3.0]), name="w"),
    "placeholder": _x,
    "uniform": lambda: ng.uniform([C, N], -1.0, 2.0, seed=3),
    "normal": lambda: ng.normal([N], 0.5, 2.0),
    "slice": lambda: ng.tensor_slice(_x(), [slice(None, None, -2), 1]),
    "pad": lambda: ng.pad(_x(), [(1, 2), 0]),
    "concat": lambda: ng.concat_along_axis([_x(), _x() * 2.0], C),
    "gather": lambda: ng.gather(_x(), ng.placeholder([H], dtype="int64"), N),
    "conv": lambda: ng.convolution(_image(), _filter(), strides=(1, 2), padding=((1, 0), 1), dilation=(2, 1)),
    "pool": lambda: ng.pooling(_image(), (3, 2), op="avg", strides=(2, 1), padding=1, ceil_mode=True),
    "call": _call,
    "scan": lambda: _scan_final().src[0],
    "scan_result": _scan_final,
    "custom_gradient": lambda: _clip_grad(ng.tanh(_x())),
}
# args holding a process-local unique id: a loaded one is a new op, so compare what survives
WITH_UID = OpGroup.RANDOM | {OpType.VARIABLE, OpType.PLACEHOLDER}


def _write(op: Op) -> Any:
    return ARG_TYPES[op.op].to_json(op, CodecContext(index={o: i for i, o in enumerate(walk([op]))}))


@pytest.mark.parametrize("name", ARG_SAMPLES)
def test_arg_round_trip(name: str) -> None:
    op = ARG_SAMPLES[name]()
    cls = ARG_TYPES[op.op]
    assert cls.check(op) is None, cls.check(op)
    data = json.loads(json.dumps(_write(op), allow_nan=False))  # plain JSON data
    arg = cls.from_json(data, CodecContext(built=walk([op])), f"{name} arg")
    if op.op in WITH_UID:
        assert arg != op.arg  # a fresh uid
        if op.op is OpType.VARIABLE:
            np.testing.assert_array_equal(arg.initial_value, op.arg.initial_value)
    else:
        assert arg == op.arg
    assert _write(op.replace(arg=arg)) == data  # and the loaded arg writes the same data


@pytest.mark.parametrize("name", ARG_SAMPLES)
def test_arg_from_bad_json(name: str) -> None:
    op = ARG_SAMPLES[name]()
    with pytest.raises(SerializationError, match=r"where: expected .*, received"):
        ARG_TYPES[op.op].from_json({"bogus": 1}, CodecContext(), "where")


@pytest.mark.parametrize("name, bad", [
    ("none", 1), ("constant_float", "2.5"), ("constant_array", ArrayValue(np.zeros(3))), ("variable", 1.5),
    ("placeholder", "p"), ("uniform", None), ("slice", ("x",)), ("pad", ((1, 2, 3), 0)), ("concat", 3), ("gather", 3),
    ("conv", "nonsense"), ("pool", None), ("call", 3), ("custom_gradient", None),
    ("scan", 3), ("scan_result", "0"),
])
def test_arg_check_refuses_a_wrong_form(name: str, bad: Any) -> None:
    good = ARG_SAMPLES[name]()
    op = good.replace(arg=bad)  # built directly, bypassing the API's checks
    assert isinstance(ARG_TYPES[op.op].check(op), str)
    with pytest.raises(ng.VerifyError, match=op.op.value):
        ng.verify(op)


def test_compiler_made_args_are_checked_but_never_written() -> None:
    x = _x()
    fused = Op(OpType.FUSED, [x], x.axes, x.dtype, FusedProgram(((OpType.TANH, (("in", 0),)),)))
    ng.verify(fused)
    with pytest.raises(SerializationError, match="serialize the graph before compiling it"):
        FusedProgram.to_json(fused, CodecContext())
    with pytest.raises(SerializationError, match="not a compiler-made op"):
        FusedProgram.from_json(None, CodecContext(), "op record 0 (fused)")
    with pytest.raises(ng.VerifyError, match="expected a FusedProgram"):
        ng.verify(fused.replace(arg="program"))
