"""Liveness: intervals by step index on hand-built graphs; views extend lifetimes; results live to the end."""

from __future__ import annotations

import pytest

import ngraph_core as ng
from ngraph_core import OpType
from ngraph_core.passes import linearize
from ngraph_core.passes.liveness import Interval, aliased_source, buffer_owners, liveness, owns_buffer

A, B = ng.make_axis(4, name="A"), ng.make_axis(6, name="B")


def _steps(order, intervals):
    """``{step of op: (start, end)}``: intervals keyed by where their op runs, to compare with literals."""
    return {order.index(op): (iv.start, iv.end) for op, iv in intervals.items()}


def test_chain_intervals_by_step():
    x = ng.placeholder([A, B])
    a = ng.exp(x)
    b = ng.tanh(a)
    c = a * b
    order = linearize([c])
    assert order == [x, a, b, c]
    live = liveness(order, [c])
    assert list(live) == [a, b, c]  # buffer owners only, in run order; the placeholder is outside the arena
    assert live[a] == Interval(1, 3)  # read last by c
    assert live[b] == Interval(2, 3)
    assert live[c] == Interval(3, 3)  # the result: to the last step


def test_a_view_extends_the_lifetime_of_the_buffer_it_views():
    x = ng.placeholder([A, B])
    a = ng.exp(x)
    first = ng.sum(a, out_axes=[A])  # the last direct read of a
    u = ng.negative(ng.sum(ng.tanh(x), out_axes=[A]))
    v = ng.axes_with_order(a, [B, A])  # a view of a, read late
    r = (first + u) + ng.sum(v, out_axes=[A])
    order = linearize([r])
    assert v.op is OpType.BROADCAST and v not in liveness(order, [r])
    assert order.index(first) < order.index(u) < order.index(v)
    live = liveness(order, [r])
    reader_of_view = next(op for op in order if v in op.src)
    assert live[a] == Interval(order.index(a), order.index(reader_of_view))
    assert live[a].end > order.index(first)


def test_chains_of_views_resolve_to_the_owner():
    x = ng.placeholder([A, B])
    a = ng.exp(x)
    v1 = ng.axes_with_order(a, [B, A])
    v2 = ng.cast_axes(v1, [ng.make_axis(6, name="B2"), ng.make_axis(4, name="A2")])
    r = ng.negative(v2)
    order = linearize([r])
    owners = buffer_owners(order)
    assert owners[v1] is a and owners[v2] is a and owners[x] is None and owners[r] is r
    assert _steps(order, liveness(order, [r])) == {1: (1, 4), 4: (4, 4)}


def test_results_live_to_the_end_even_through_a_view():
    x = ng.placeholder([A, B])
    a = ng.exp(x)
    early = ng.axes_with_order(a, [B, A])
    late = ng.sum(ng.tanh(x))
    order = linearize([early, late])
    live = liveness(order, [early, late])
    last = len(order) - 1
    assert order.index(late) == last and order.index(a) < last
    assert live[a] == Interval(order.index(a), last)
    assert live[late] == Interval(last, last)


def test_sequential_aliases_its_last_source_and_reads_the_others():
    x = ng.placeholder([A, B])
    e1, e2 = ng.exp(x), ng.tanh(x)
    seq = ng.sequential([e1, e2])
    r = ng.negative(seq)
    order = linearize([r])
    assert aliased_source(seq) is e2
    live = liveness(order, [r])
    assert seq not in live
    assert live[e1] == Interval(order.index(e1), order.index(seq))  # read by the sequential step only
    assert live[e2] == Interval(order.index(e2), order.index(r))  # read through the sequential's value


def test_custom_gradient_aliases_its_forward_value():
    @ng.custom_gradient(name="tests.passes.liveness.double")
    def double(x):
        return x * 2.0, lambda ctx: [ctx * 2.0]

    x = ng.placeholder([A, B])
    e = ng.exp(x)
    y = double(e)
    r = ng.negative(y)
    order = linearize([r])
    value = y.src[0]
    assert y.op is OpType.CUSTOM_GRADIENT and aliased_source(y) is value
    live = liveness(order, [r])
    assert live[value].end == order.index(r)
    assert live[e].end == order.index(y)  # the inputs are read by the custom_gradient step (as its sources)


def test_persistent_external_and_assigned_values_are_not_in_the_arena():
    x = ng.placeholder([A, B])
    w = ng.variable([A, B], initial_value=1.0)
    c = ng.constant(3.0)
    value = ng.exp(x) * c + w
    write = ng.assign(w, value)
    viewed = ng.axes_with_order(write, [B, A])  # a view of the variable's storage
    r = ng.doall([write, ng.negative(viewed)])
    order = linearize([r])
    live = liveness(order, [r])
    owners = buffer_owners(order)
    for op in (x, w, c, write, viewed, r):
        assert op in order and op not in live and owners[op] is None
    assert not owns_buffer(w) and not owns_buffer(write) and owns_buffer(value)
    assert live[value].end == order.index(write)


def test_a_value_nobody_reads_lives_at_its_own_step():
    x = ng.placeholder([A, B])
    a, b = ng.exp(x), ng.tanh(x)
    order = linearize([a, b])
    live = liveness(order, [])  # no results: nothing is copied out
    assert live[a] == Interval(order.index(a), order.index(a))
    assert live[b] == Interval(order.index(b), order.index(b))


def test_a_result_missing_from_the_order_is_an_error():
    x = ng.placeholder([A, B])
    a = ng.exp(x)
    with pytest.raises(ValueError, match="not in the order"):
        liveness(linearize([a]), [ng.tanh(a)])


def test_interval_overlap_and_membership():
    assert Interval(0, 2).overlaps(Interval(2, 5)) and Interval(2, 5).overlaps(Interval(0, 2))
    assert not Interval(0, 1).overlaps(Interval(2, 3))
    assert 3 in Interval(2, 4) and 5 not in Interval(2, 4) and "3" not in Interval(2, 4)
    with pytest.raises(AttributeError):
        Interval(0, 1).start = 2  # type: ignore[misc]


def test_liveness_writes_nothing_onto_ops():
    x = ng.placeholder([A, B])
    a = ng.exp(x)
    r = ng.negative(ng.axes_with_order(a, [B, A]))
    order = linearize([r])
    before = [(op.meta.name, set(op.meta.labels), op.meta.scope) for op in order]
    liveness(order, [r])
    buffer_owners(order)
    assert [(op.meta.name, set(op.meta.labels), op.meta.scope) for op in order] == before
