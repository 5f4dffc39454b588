"""dce: dead elements of doall/sequential go; effects, values and the run order stay."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.passes.dce import dce as dce_pass
from ngraph_core.passes.dce import schedule

C, N = ng.make_axis(4, name="C"), ng.make_axis(3, name="N")
x = ng.placeholder([C, N], name="x")
FEED = np.random.default_rng(0).uniform(0.5, 2.0, (4, 3)).astype("float32")


def dce(roots: list[ng.Op]) -> list[ng.Op]:
    """The pass under test, with the IR verified after it."""
    out = dce_pass(roots)
    ng.verify(out)
    return out


def run_steps(roots: list[ng.Op], variables: list[ng.Op], steps: int = 3) -> list:
    """Each step's results, then the variables' final values (fresh transformer, no optimizing pass)."""
    with ng.transformers.make_transformer(optimize=False) as t:
        f = t.computation(list(roots), x) if x in ng.ordered_ops(roots) else t.computation(list(roots))
        outs = [f(FEED) if f.placeholders else f() for _ in range(steps)]
        return outs + [t.read_variable(v) for v in variables]


def assert_same_runs(before: list[ng.Op], after: list[ng.Op], variables: list[ng.Op]) -> None:
    ng.verify(after)
    want, got = run_steps(before, variables), run_steps(after, variables)
    for w, g in zip(want, got, strict=True):
        for a, b in zip(w if isinstance(w, tuple) else (w,), g if isinstance(g, tuple) else (g,), strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(b, a, rtol=1e-6)


def test_training_step_before_and_expected_with_gradients():
    W = ng.variable([C], initial_value=np.linspace(0.1, 0.4, 4), name="W")
    loss = ng.sum(ng.square(W * x))
    (grad,) = ng.gradients(loss, [W])
    update = ng.assign(W, W - 0.01 * grad)
    before = [loss, grad, ng.doall([update, grad * 2.0, ng.sum(grad)])]
    expected = [loss, grad, ng.doall([update])]
    assert dce(before) == expected
    assert_same_runs(before, dce(before), [W])


def test_a_doall_with_nothing_to_do_keeps_a_constant():
    v = ng.variable([C], initial_value=1.0)
    assert dce([ng.doall([v * 2.0, ng.assign(v, v)])]) == [ng.doall([ng.constant(0.0)])]
    assert dce([ng.doall([ng.constant(0.0)])]) == [ng.doall([ng.constant(0.0)])]


def test_self_assignment_goes_from_a_doall_with_other_updates():
    v, w = ng.variable([C], initial_value=1.0), ng.variable([C], initial_value=2.0)
    before = [ng.doall([ng.assign(w, w * 2.0), ng.assign(v, v)])]
    assert dce(before) == [ng.doall([ng.assign(w, w * 2.0)])]
    assert_same_runs(before, dce(before), [v, w])


def test_pure_leading_elements_of_a_sequential_go():
    v = ng.variable([C], initial_value=1.0)
    before = [ng.sequential([ng.exp(v) * 3.0, ng.assign(v, v + 1.0), v * 4.0])]
    expected = [ng.sequential([ng.assign(v, v + 1.0), v * 4.0])]
    assert dce(before) == expected
    assert_same_runs(before, expected, [v])


def test_a_sequential_left_with_one_element_is_that_element():
    v = ng.variable([C], initial_value=1.0)
    before = [ng.sequential([ng.exp(v), v * 4.0])]
    assert dce(before) == [v * 4.0]


def test_an_element_whose_value_is_read_later_keeps_its_place():
    v = ng.variable([C], initial_value=1.0)
    old = ng.tanh(v)  # read before the assign: the last element must see the old value
    before = [ng.sequential([old, ng.assign(v, 5.0), old + v])]
    assert dce(before) == before
    assert_same_runs(before, dce(before), [v])


def test_a_self_assignment_that_orders_nothing_it_writes_goes():
    v, w = ng.variable([C], initial_value=1.0), ng.variable([C], initial_value=1.0)
    # exp(w) is ordered after assign(v, v) but not after assign(w, ...): it reads the old w
    # either way (linearize rule 3), so the self-assignment orders nothing and can go
    before = [ng.doall([ng.assign(w, w * 3.0)]), ng.sequential([ng.assign(v, v), ng.exp(w) + 2.0])]
    after = dce(before)
    assert after[1] is ng.exp(w) + 2.0
    assert_same_runs(before, after, [v, w])


def test_a_self_assignment_that_orders_a_read_of_its_variable_stays():
    v = ng.variable([C], initial_value=1.0)
    # the read of v is ordered after the assign that writes v (data flow), which must stay
    before = [ng.doall([ng.assign(v, v * 3.0)]), ng.sequential([ng.assign(v, v * 3.0), v + 2.0])]
    assert dce(before)[1].op is ng.OpType.SEQUENTIAL
    assert_same_runs(before, dce(before), [v])


def test_without_writes_every_dead_element_goes():
    v = ng.variable([C], initial_value=1.0)
    before = [ng.sequential([ng.assign(v, v), ng.exp(v), v * 2.0])]
    assert dce(before) == [v * 2.0]


def test_schedule_counts_the_assigns_before_each_op():
    v = ng.variable([C], initial_value=1.0)
    first = ng.assign(v, 5.0)
    seq = ng.sequential([first, v * 2.0])
    assigns, before = schedule([seq])
    assert assigns == [first]
    assert before[first] == 0 and before[v * 2.0] == 1


def test_sequential_orders_every_element_after_all_earlier_ones():
    v = ng.variable([C], initial_value=1.0)
    with ng.transformers.make_transformer(optimize=False) as t:
        value = t.computation(ng.sequential([ng.assign(v, 5.0), v, v * 2.0]))()
    np.testing.assert_allclose(value, 10.0)  # api/control.py: "runs a, then b, then c"


def test_a_self_assignment_next_to_another_update_of_the_variable_stays():
    v = ng.variable([C], initial_value=1.0)
    # both read v from before the update: assign(v, v) restores the old value
    before = [ng.doall([ng.assign(v, v + 1.0), ng.assign(v, v)])]
    assert dce(before) == before
    assert run_steps(before, [v])[-1] == pytest.approx(1.0)
