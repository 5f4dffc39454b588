"""The one node type: hash-consing, immutability, graph walks, substitute, printing, verify."""

from __future__ import annotations

import copy
import pickle

import pytest

import ngraph_core as ng
from ngraph_core import Axes, Op, OpType
from ngraph_core.ir import substitute

C, H, N = ng.make_axis(4, name="C"), ng.make_axis(3, name="H"), ng.make_axis(8, name="N")


def _scope_path(op: Op) -> list[tuple[str, str]]:
    return [(entry.name, entry.kind) for entry in op.meta.scope]


# -- hash-consing ----------------------------------------------------------------------------


def test_equal_structure_is_the_same_object():
    x, w = ng.placeholder([C, N]), ng.variable([H, C])
    assert (x + 1.0) is (x + 1.0)
    assert ng.dot(w, x) is ng.dot(w, x)
    assert ng.sum(x, reduction_axes=[N]) is ng.sum(x, reduction_axes=[N])
    assert ng.constant(2.0) is ng.constant(2.0)
    assert ng.tanh(ng.dot(w, x)) is ng.tanh(ng.dot(w, x))
    # different structure is a different object
    assert (x + 1.0) is not (x + 2.0)
    assert (x + 1.0) is not (x - 1.0)
    assert ng.sum(x, reduction_axes=[N]) is not ng.sum(x, reduction_axes=[C])


def test_equal_array_constants_are_merged():
    import numpy as np

    a = ng.constant(np.arange(4.0), [C])
    b = ng.constant(np.arange(4.0), [C])
    c = ng.constant(np.arange(4.0) + 1, [C])
    assert a is b
    assert a is not c


def test_two_variables_or_placeholders_with_the_same_axes_are_distinct():
    v1, v2 = ng.variable([C], initial_value=0), ng.variable([C], initial_value=0)
    p1, p2 = ng.placeholder([C]), ng.placeholder([C])
    assert v1 is not v2 and p1 is not p2
    assert (v1 + 1.0) is not (v2 + 1.0)
    assert (p1 * p1) is not (p2 * p2)
    r1, r2 = ng.uniform([C], seed=0), ng.uniform([C], seed=0)
    assert r1 is not r2  # random ops draw fresh samples each; never merged


def test_scope_is_part_of_identity():
    x = ng.placeholder([C])
    with ng.name_scope("Affine_0", kind="Affine"):
        a = ng.tanh(x)
    with ng.name_scope("Affine_1", kind="Affine"):
        b = ng.tanh(x)
    outside = ng.tanh(x)
    assert a is not b and a is not outside and b is not outside
    assert _scope_path(a) == [("Affine_0", "Affine")]
    assert _scope_path(b) == [("Affine_1", "Affine")]
    assert _scope_path(outside) == []
    # within one scope, equal structure is still one object
    with ng.name_scope("Affine_0", kind="Affine"):
        assert ng.tanh(x) is a


def test_nested_scopes_record_the_path_with_kinds():
    x = ng.placeholder([C])
    with ng.name_scope("model", kind="Sequential"):
        with ng.name_scope("conv1", kind="Conv"):
            y = ng.relu(x)
        z = ng.exp(x)
    assert _scope_path(y) == [("model", "Sequential"), ("conv1", "Conv")]
    assert _scope_path(z) == [("model", "Sequential")]
    assert ng.relu(x) is not y  # after the scopes closed, a fresh op in the root scope


def test_labels_and_names_are_not_identity_and_merge_on_rebuild():
    x = ng.placeholder([C])
    first = (x * x).labeled("mine").named("square_me")
    again = x * x
    assert again is first
    assert "mine" in again.meta.labels
    assert again.meta.name == "square_me"
    # constructing the same structure with other labels merges them into one meta
    by_hand = Op(OpType.MUL, [x, x], Axes([C]), "float32", labels={"other"})
    assert by_hand is first
    assert {"mine", "other"} <= by_hand.meta.labels


# -- immutability, pickling ------------------------------------------------------------------


def test_op_is_immutable():
    x = ng.placeholder([C])
    y = x + 1.0
    for field, value in [("op", OpType.SUB), ("src", ()), ("axes", Axes([H])), ("dtype", "float64"),
                         ("arg", 3), ("meta", None), ("brand_new", 1)]:
        with pytest.raises(AttributeError):
            setattr(y, field, value)
    assert y.op is OpType.ADD and y.axes == Axes([C]) and y.dtype == "float32"


def test_op_attributes_cannot_be_deleted():
    y = ng.placeholder([C]) + 3.0
    with pytest.raises(AttributeError):
        del y.axes
    assert y.axes == Axes([C])


def test_op_is_not_picklable_but_copies_are_itself():
    y = ng.placeholder([C]) + 1.0
    with pytest.raises(TypeError):
        pickle.dumps(y)
    assert copy.copy(y) is y
    assert copy.deepcopy(y) is y


def test_op_has_no_truth_value():
    x = ng.placeholder([C])
    with pytest.raises(TypeError):
        bool(x > 0.0)


# -- graph walks -------------------------------------------------------------------------------


def _check_topological(order: list[Op]) -> None:
    position = {id(op): i for i, op in enumerate(order)}
    assert len(position) == len(order), "an op appears twice"
    for op in order:
        for s in op.src:
            assert id(s) in position, f"{s} missing"
            assert position[id(s)] < position[id(op)], f"{s} after its consumer {op}"


def _graph():
    x, w = ng.placeholder([C, N], name="inputs"), ng.variable([H, C], name="weights")
    b = ng.variable([H], name="bias")
    hidden = ng.tanh(ng.dot(w, x) + b)
    loss = ng.sum(hidden * hidden) + ng.sum(b)
    return x, w, b, hidden, loss


def test_toposort_puts_every_op_after_its_sources():
    x, w, b, hidden, loss = _graph()
    order = ng.ordered_ops([loss])
    _check_topological(order)
    assert order[-1] is loss
    for op in (x, w, b, hidden):
        assert any(o is op for o in order)
    # every op reachable from the root, and nothing else
    reachable, stack = set(), [loss]
    while stack:
        op = stack.pop()
        if id(op) not in reachable:
            reachable.add(id(op))
            stack.extend(op.src)
    assert {id(o) for o in order} == reachable


def test_toposort_of_several_roots_shares_ops():
    x, w, b, hidden, loss = _graph()
    order = ng.ordered_ops([hidden, loss, hidden])
    _check_topological(order)
    assert sum(o is hidden for o in order) == 1
    assert len(order) == len(ng.ordered_ops([loss]))


def test_variables_and_placeholders_of_an_op():
    x, w, b, hidden, loss = _graph()
    assert loss.variables() == [o for o in ng.ordered_ops([loss]) if o.op is OpType.VARIABLE]
    assert {id(v) for v in loss.variables()} == {id(w), id(b)}
    assert len(loss.variables()) == 2
    assert loss.placeholders() == [x]
    assert ng.sum(b).variables() == [b]
    assert ng.sum(b).placeholders() == []


def test_substitute_rebuilds_only_above_a_replacement_and_keeps_meta():
    x, y, y2 = ng.placeholder([C], name="x"), ng.placeholder([C], name="y"), ng.placeholder([C], name="y2")
    with ng.name_scope("block", kind="Block"):
        left = (x * 2.0).named("left").labeled("keep")
        out = (left + y).named("out").labeled("result")
    rebuilt, = substitute([out], {y: y2})
    assert rebuilt is not out
    assert rebuilt.src[0] is left  # not above the replacement: the very same object
    assert rebuilt.src[1] is y2
    assert rebuilt.op is OpType.ADD
    assert rebuilt.meta.name == "out"
    assert "result" in rebuilt.meta.labels
    assert _scope_path(rebuilt) == [("block", "Block")]
    # the original graph is untouched
    assert out.src[1] is y


def test_substitute_with_a_function_and_deep_rebuild():
    x, x2, y = ng.placeholder([C]), ng.placeholder([C]), ng.placeholder([C])
    with ng.name_scope("block", kind="Block"):
        left = ng.exp(x).named("left")
        out = left * y
    new_out, new_left = substitute([out, left], lambda op: x2 if op is x else None)
    assert new_left is not left and new_left.src[0] is x2 and new_left.meta.name == "left"
    assert new_out.src[0] is new_left and new_out.src[1] is y
    assert _scope_path(new_left) == [("block", "Block")]
    # rebuilding onto the original gives back the original objects (hash-consing)
    back, = substitute([new_out], {x2: x})
    assert back is out


def test_substitute_with_no_replacement_returns_the_same_ops():
    x, w, b, hidden, loss = _graph()
    assert substitute([loss, hidden], {})[0] is loss
    assert substitute([loss, hidden], lambda op: None)[1] is hidden


# -- printing -----------------------------------------------------------------------------------


def test_format_graph_has_one_ssa_line_per_op():
    x, w, b, hidden, loss = _graph()
    text = ng.format_graph(loss)
    lines = text.splitlines()
    order = ng.ordered_ops([loss])
    assert [line.split(" = ")[0] for line in lines[:-1]] == [f"%{i}" for i in range(len(order))]
    assert lines[0].startswith("%0 = ")
    assert lines[-1] == f"return %{len(order) - 1}"
    assert "dot(" in text and "tanh(" in text
    assert "[H:3, N:8]" in text  # the axes of dot(w, x)
    # names are shown on their ops' lines
    assert "weights" in lines[next(i for i, o in enumerate(order) if o is w)]
    assert "inputs" in lines[next(i for i, o in enumerate(order) if o is x)]


def test_repr_of_an_op_is_readable():
    x = ng.placeholder([C, N], name="x")
    text = repr(ng.sum(x, reduction_axes=[N]))
    assert "sum" in text and "[C:4]" in text and "float32" in text


# -- verify -----------------------------------------------------------------------------------


def test_verify_passes_on_api_built_graphs():
    x, w, b, hidden, loss = _graph()
    grads = ng.gradients(loss, [w, b])
    update = ng.doall([ng.assign(w, w - 0.1 * grads[0]), ng.assign(b, b - 0.1 * grads[1])])
    ng.verify(loss)
    ng.verify([loss, update, *grads])
    ng.verify(ng.sequential([ng.assign(b, b + 1.0), b * 2.0]))


def test_verify_raises_on_wrong_axes():
    a, b = ng.placeholder([C]), ng.placeholder([C])
    bad = Op(OpType.ADD, [a, b], Axes([H]), "float32")
    with pytest.raises(ng.VerifyError) as info:
        ng.verify([bad])
    assert "add" in str(info.value)
    # and when the bad op is buried below good ones
    with pytest.raises(ng.VerifyError):
        ng.verify(ng.exp(bad))


def test_verify_raises_on_wrong_dtype_and_arity():
    a, b = ng.placeholder([C]), ng.placeholder([C])
    with pytest.raises(ng.VerifyError):
        ng.verify(Op(OpType.ADD, [a, b], Axes([C]), "float64"))  # inference says float32
    with pytest.raises(ng.VerifyError):
        ng.verify(Op(OpType.ADD, [a, b], Axes([C]), "float99"))  # unknown dtype
    with pytest.raises(ng.VerifyError):
        ng.verify(Op(OpType.EXP, [a, b], Axes([C]), "float32"))  # unary with two inputs
    with pytest.raises(ng.VerifyError):
        ng.verify(Op(OpType.ASSIGN, [a, b], Axes([C]), "float32"))  # assign into a placeholder


def test_hand_built_valid_op_is_the_api_op():
    a, b = ng.placeholder([C]), ng.placeholder([C])
    by_hand = Op(OpType.ADD, [a, b], Axes([C]), "float32")
    assert by_hand is a + b
    ng.verify(by_hand)
