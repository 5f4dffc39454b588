"""The NumPy transformer: shared variables, ordered side effects, results, feeds, errors, float64."""

from __future__ import annotations

import ast
import importlib.util

import numpy as np
import pytest

import ngraph_core as ng

C, N = ng.make_axis(4, name="C"), ng.make_axis(8, name="N")


def _transformer(**options):
    return ng.transformers.make_transformer(**options)


# -- variables ---------------------------------------------------------------------------------


def test_variables_are_shared_between_computations_of_one_transformer():
    v = ng.variable([C], initial_value=1.0)
    with _transformer() as t:
        train = t.computation(ng.assign(v, v + 1.0))
        evaluate = t.computation(v * 10.0)
        np.testing.assert_array_equal(evaluate(), np.full(4, 10.0))
        np.testing.assert_array_equal(train(), np.full(4, 2.0))
        np.testing.assert_array_equal(evaluate(), np.full(4, 20.0))  # eval sees train's update
        train()
        train()
        np.testing.assert_array_equal(evaluate(), np.full(4, 40.0))
        # a computation compiled after the updates sees the current value, not the initial one
        late = t.computation(v + 0.0)
        np.testing.assert_array_equal(late(), np.full(4, 4.0))


def test_each_transformer_has_its_own_variables():
    v = ng.variable([C], initial_value=1.0)
    with _transformer() as t1, _transformer() as t2:
        bump1 = t1.computation(ng.assign(v, v + 1.0))
        read2 = t2.computation(v * 1.0)
        bump1()
        bump1()
        np.testing.assert_array_equal(t1.read_variable(v), np.full(4, 3.0))
        np.testing.assert_array_equal(read2(), np.full(4, 1.0))


def test_callable_initial_value_is_called_once_with_the_axes():
    calls = []

    def init(axes):
        calls.append(axes)
        return np.arange(axes.size, dtype=np.float64).reshape(axes.lengths)

    v = ng.variable([C, N], initial_value=init)
    with _transformer() as t:
        f = t.computation(v * 1.0)
        g = t.computation(ng.sum(v))
        f()
        f()
        g()
        np.testing.assert_array_equal(t.read_variable(v), np.arange(32.0).reshape(4, 8))
    assert len(calls) == 1
    assert calls[0] == v.axes


@pytest.mark.parametrize("initial_value, expected", [
    (0, np.zeros((4, 8))),
    (2.5, np.full((4, 8), 2.5)),
    (np.arange(32.0).reshape(4, 8), np.arange(32.0).reshape(4, 8)),
    (lambda axes: np.ones(axes.lengths) * 7, np.full((4, 8), 7.0)),
])
def test_initial_value_forms(initial_value, expected):
    v = ng.variable([C, N], initial_value=initial_value)
    with _transformer() as t:
        got = t.computation(v)()
    assert got.shape == (4, 8)
    np.testing.assert_array_equal(got, expected)


def test_array_initial_value_is_copied_at_construction():
    array = np.zeros((4,))
    v = ng.variable([C], initial_value=array)
    array[:] = 5.0
    with _transformer() as t:
        np.testing.assert_array_equal(t.read_variable(v), np.zeros(4))


def test_a_transposed_initial_value_is_stored_in_c_order():
    """A filter made ``[K, C, R, S]`` and handed over as a ``[C, R, S, K]`` view is stored C-contiguous in the
    variable's axes order (kernels that write the storage in place, such as an optimizer's update, then write
    it with unit stride), with the same values; an in-place update reads and writes it correctly."""
    made = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)  # [K, C, R, S]
    axes = [ng.make_axis(3, "C"), ng.make_axis(2, "R"), ng.make_axis(2, "S"), ng.make_axis(2, "K")]
    w = ng.variable(axes, initial_value=made.transpose(1, 2, 3, 0))
    with _transformer() as t:
        stored = t._variable(w)
        assert stored.flags.c_contiguous
        np.testing.assert_array_equal(t.read_variable(w), made.transpose(1, 2, 3, 0))
        t.computation(ng.assign(w, w * 2.0 - 1.0))()
        np.testing.assert_array_equal(t.read_variable(w), made.transpose(1, 2, 3, 0) * 2.0 - 1.0)


def test_array_initial_value_of_the_wrong_shape_raises():
    with pytest.raises(ng.AxesError):
        ng.variable([C, N], initial_value=np.zeros((8, 4)))


def test_read_and_write_variable():
    v = ng.variable([C], initial_value=0.0)
    with _transformer() as t:
        double = t.computation(v * 2.0)
        t.write_variable(v, np.array([1.0, 2.0, 3.0, 4.0]))
        np.testing.assert_array_equal(t.read_variable(v), [1, 2, 3, 4])
        np.testing.assert_array_equal(double(), [2, 4, 6, 8])
        with pytest.raises(ng.AxesError):
            t.write_variable(v, np.zeros(5))
        copy = t.read_variable(v)
        copy[:] = -1
        np.testing.assert_array_equal(t.read_variable(v), [1, 2, 3, 4])


# -- ordered side effects ---------------------------------------------------------------------------


def test_sequential_sees_the_new_value():
    v = ng.variable([], initial_value=2.0)
    with _transformer() as t:
        f = t.computation(ng.sequential([ng.assign(v, v + 1.0), v * 2.0]))
        assert float(f()) == 6.0  # (2 + 1) * 2, not 2 * 2
        assert float(t.read_variable(v)) == 3.0
        assert float(f()) == 8.0


def test_sequential_runs_in_order_even_for_pure_ops_that_do_not_depend_on_the_assign():
    v = ng.variable([], initial_value=1.0)
    with _transformer() as t:
        f = t.computation(ng.sequential([ng.assign(v, 5.0), ng.exp(v) * 1.0]))
        np.testing.assert_allclose(f(), np.exp(5.0), rtol=1e-6)


def test_doall_gradients_see_the_old_weights():
    w, b = ng.variable([], initial_value=2.0), ng.variable([], initial_value=3.0)
    loss = ng.square(w * b - 1.0)
    grad_w, grad_b = ng.gradients(loss, [w, b])
    update = ng.doall([ng.assign(w, w - 0.1 * grad_w), ng.assign(b, b - 0.1 * grad_b)])
    with _transformer(float_dtype="float64") as t:
        loss_value, nothing = t.computation([loss, update])()
        assert nothing is None
        assert float(loss_value) == 25.0  # the loss is computed with the old weights too
        # old weights: grad_w = 2(wb - 1)b = 30, grad_b = 2(wb - 1)w = 20
        assert float(t.read_variable(w)) == pytest.approx(2.0 - 3.0)
        assert float(t.read_variable(b)) == pytest.approx(3.0 - 2.0)  # 2.2 if grad_b read the new w


def test_doall_of_computed_values_reads_them_before_any_assignment():
    a, b = ng.variable([C], initial_value=1.0), ng.variable([C], initial_value=2.0)
    with _transformer() as t:
        f = t.computation(ng.doall([ng.assign(a, b * 1.0 + 0.5), ng.assign(b, a * 1.0 + 0.5)]))
        f()
        np.testing.assert_array_equal(t.read_variable(a), np.full(4, 2.5))
        np.testing.assert_array_equal(t.read_variable(b), np.full(4, 1.5))


def test_doall_swaps_two_variables():
    a, b = ng.variable([C], initial_value=1.0), ng.variable([C], initial_value=2.0)
    with _transformer() as t:
        swap = t.computation(ng.doall([ng.assign(a, b), ng.assign(b, a)]))
        swap()
        np.testing.assert_array_equal(t.read_variable(a), np.full(4, 2.0))
        np.testing.assert_array_equal(t.read_variable(b), np.full(4, 1.0))
        swap()
        np.testing.assert_array_equal(t.read_variable(a), np.full(4, 1.0))
        np.testing.assert_array_equal(t.read_variable(b), np.full(4, 2.0))


def test_momentum_through_a_nested_assign():
    w, velocity = ng.variable([C], initial_value=1.0), ng.variable([C], initial_value=0.0)
    g = ng.placeholder([C])
    step = ng.assign(w, w + ng.assign(velocity, 0.9 * velocity - g))
    gradients = [np.array([1.0, 2.0, 0.0, -1.0]), np.array([0.5, 0.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0, 1.0])]
    w_ref, v_ref = np.ones(4), np.zeros(4)
    with _transformer(float_dtype="float64") as t:
        f = t.computation(step, g)
        for grad in gradients:
            v_ref = 0.9 * v_ref - grad
            w_ref = w_ref + v_ref
            np.testing.assert_allclose(f(grad), w_ref, rtol=1e-6)
        np.testing.assert_allclose(t.read_variable(velocity), v_ref, rtol=1e-6)
        np.testing.assert_allclose(t.read_variable(w), w_ref, rtol=1e-6)


# -- results -------------------------------------------------------------------------------------


def test_result_forms():
    x = ng.placeholder([C])
    v = ng.variable([C], initial_value=0.0)
    xv = np.arange(4.0)
    with _transformer() as t:
        single = t.computation(x * 2.0, x)(xv)
        assert isinstance(single, np.ndarray)
        np.testing.assert_array_equal(single, xv * 2)
        both = t.computation([x * 2.0, ng.sum(x)], x)(xv)
        assert isinstance(both, tuple) and len(both) == 2
        np.testing.assert_array_equal(both[0], xv * 2)
        assert float(both[1]) == 6.0
        one_in_list = t.computation([ng.sum(x)], x)(xv)
        assert isinstance(one_in_list, tuple) and len(one_in_list) == 1
        assert t.computation(ng.doall([ng.assign(v, x)]), x)(xv) is None
        loss, nothing = t.computation([ng.sum(v), ng.doall([ng.assign(v, v + 1.0)])])()
        assert nothing is None and float(loss) == 6.0


def test_default_results_are_float32():
    x = ng.placeholder([C])
    with _transformer() as t:
        assert t.computation(x * 2.0, x)(np.ones(4)).dtype == np.float32


def test_float64_mode_returns_float64_and_is_more_precise():
    x = ng.placeholder([C])
    tiny = (x + 1e-9) - x  # lost in float32 (eps ~1.2e-7), kept in float64
    xv = np.ones(4)
    with _transformer() as t32:
        low = t32.computation(tiny, x)(xv)
    with _transformer(float_dtype="float64") as t64:
        high = t64.computation(tiny, x)(xv)
        assert t64.computation(ng.variable([C]) * 1.0)().dtype == np.float64
    assert low.dtype == np.float32 and high.dtype == np.float64
    np.testing.assert_array_equal(low, np.zeros(4))
    np.testing.assert_allclose(high, np.full(4, 1e-9), rtol=1e-6)


def test_float64_mode_keeps_python_constants_exact():
    x = ng.placeholder([C])
    with _transformer(float_dtype="float64") as t:
        got = t.computation(x * 0.1, x)(np.ones(4))
    np.testing.assert_allclose(got, np.full(4, 0.1), rtol=1e-15)


def test_returned_variable_values_are_copies():
    v = ng.variable([C], initial_value=1.0)
    with _transformer() as t:
        got = t.computation(v)()
        got[:] = 99.0
        np.testing.assert_array_equal(t.read_variable(v), np.ones(4))
        after_assign = t.computation(ng.assign(v, v + 1.0))()
        after_assign[:] = -5.0
        np.testing.assert_array_equal(t.read_variable(v), np.full(4, 2.0))


def test_results_of_one_call_survive_the_next_call():
    x = ng.placeholder([C])
    with _transformer() as t:
        f = t.computation([x * 2.0, ng.exp(x)], x)
        first = f(np.ones(4))
        f(np.full(4, 5.0))
        np.testing.assert_array_equal(first[0], np.full(4, 2.0))
        np.testing.assert_allclose(first[1], np.full(4, np.e), rtol=1e-6)


def test_results_do_not_alias_the_fed_arrays():
    x = ng.placeholder([C])
    fed = np.zeros(4, dtype=np.float32)
    with _transformer() as t:
        got = t.computation(x, x)(fed)
        got[:] = 3.0
    np.testing.assert_array_equal(fed, np.zeros(4))


def test_constant_results_are_copies():
    k = ng.constant(2.0, [C])
    with _transformer() as t:
        f = t.computation(k)
        got = f()
        got[:] = 99.0
        np.testing.assert_array_equal(f(), np.full(4, 2.0))


# -- feeds and errors -------------------------------------------------------------------------------


def test_wrong_feed_shape_names_the_placeholder_and_both_shapes():
    X = ng.placeholder([C, N], name="features")
    with _transformer() as t:
        f = t.computation(X * 2.0, X)
        with pytest.raises(ng.FeedError) as info:
            f(np.zeros((8, 4)))
    message = str(info.value)
    assert "features" in message
    assert "(4, 8)" in message and "(8, 4)" in message


def test_wrong_number_of_inputs_raises():
    X, Y = ng.placeholder([C], name="X"), ng.placeholder([C], name="Y")
    with _transformer() as t:
        f = t.computation(X + Y, X, Y)
        with pytest.raises(ng.FeedError):
            f(np.zeros(4))
        with pytest.raises(ng.FeedError):
            f(np.zeros(4), np.zeros(4), np.zeros(4))
        np.testing.assert_array_equal(f(np.ones(4), np.ones(4)), np.full(4, 2.0))


def test_placeholders_are_fed_in_the_order_given():
    X, Y = ng.placeholder([C]), ng.placeholder([C])
    with _transformer() as t:
        f = t.computation(X - Y, Y, X)
        np.testing.assert_array_equal(f(np.ones(4), np.full(4, 3.0)), np.full(4, 2.0))


def test_a_result_needing_an_unlisted_placeholder_raises():
    X, Y = ng.placeholder([C], name="X"), ng.placeholder([C], name="Ymissing")
    with _transformer() as t:
        with pytest.raises(ng.NgraphError) as info:
            t.computation(X + Y, X)
    assert "Ymissing" in str(info.value)


def test_unknown_backend_raises():
    with pytest.raises(ng.NgraphError) as info:
        ng.transformers.make_transformer("nope")
    assert "nope" in str(info.value) and "numpy" in str(info.value)


def _gpu_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def test_cupy_backend_is_selectable_but_unavailable_without_a_gpu():
    assert "cupy" in ng.transformers.transformer_choices()
    if _gpu_available():
        pytest.skip("CuPy and a GPU are present here; the unavailable-backend error cannot be observed")
    with pytest.raises(ng.BackendUnavailableError) as info:
        ng.transformers.make_transformer("cupy")
    assert "numpy" in str(info.value)  # the hint names the fallback


# -- the generated plan -----------------------------------------------------------------------------


def test_computation_source_is_readable_python_with_one_line_per_op():
    X = ng.placeholder([C, N], name="X")
    W = ng.variable([C], initial_value=0.0, name="W")
    y = ng.sigmoid(ng.dot(W, X) + 1.0)
    with _transformer() as t:
        comp = t.computation([y, ng.sum(y)], X)
    source = comp.source
    tree = ast.parse(source)  # valid Python
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert len(functions) == 1
    order = comp.graph.order
    assignments = [node for node in functions[0].body if isinstance(node, ast.Assign)]
    assert len(assignments) >= len(order)
    assert isinstance(functions[0].body[-1], ast.Return)
    body_lines = [line for line in source.splitlines()[1:] if line.strip() and not line.strip().startswith("return")]
    for op in order:  # every op of the plan is mentioned by its kind
        assert any(op.op.value in line for line in body_lines), op.op.value
    assert "X" in source  # placeholder names appear in the plan's comments
