"""``ng.scan``: forward vs NumPy loops, gradients vs finite differences, variable lengths, compile time, errors."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import pytest
from scan_reference import ng_rnn, np_rnn

import ngraph_core as ng
from ngraph_core import AxesError, DTypeError, GraphError, Op, OpType

F, H, N = ng.make_axis(2, "F"), ng.make_axis(3, "H"), ng.make_axis(3, "N")
H2 = ng.make_axis(3, "H2")
rng = np.random.default_rng(0)
# exact in float32: variables keep their float32 initial values, even on a float64 transformer
W0, U0 = (a.astype(np.float32).astype(np.float64) for a in (rng.standard_normal((3, 2)) * 0.8,
                                                            rng.standard_normal((3, 3)) * 0.5))


def rec(steps: int) -> ng.Axis:
    return ng.make_axis(steps, "REC")


def rnn_graph(steps: int, lengths: bool = False, reverse: bool = False) -> tuple[list[Op], list[Op], list[Op]]:
    """(results [h_final, ys], placeholders [x, h0 (, lengths)], variables [W, U]) of the tanh RNN."""
    x, h0 = ng.placeholder([F, rec(steps), N], name="x"), ng.placeholder([H, N], name="h0")
    w = ng.variable([H, F], initial_value=W0, name="W")
    u = ng.variable([H, H2], initial_value=U0, name="U")
    lens = ng.placeholder([N], dtype="int32", name="lengths") if lengths else None
    final, ys = ng_rnn(x, h0, w, u, rec(steps), lengths=lens, reverse=reverse)
    return [final, ys], [x, h0] + ([lens] if lengths else []), [w, u]


# -- forward ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_sum_without_batch_axis(reverse: bool) -> None:
    x = ng.placeholder([H, rec(5)])
    (total,), (sums,) = ng.scan(lambda x_t, s: ([s + x_t], [s + x_t]), [x], [ng.constant(0.0, [H])], rec(5),
                                reverse=reverse)
    assert sums.axes == ng.make_axes([H, rec(5)])  # no N: the axis is appended
    xv = rng.standard_normal((3, 5))
    with ng.transformers.make_transformer() as t:
        got_total, got_sums = t.computation([total, sums], x)(xv)
    want = np.cumsum(xv[:, ::-1], 1)[:, ::-1] if reverse else np.cumsum(xv, 1)
    np.testing.assert_allclose(got_sums, want, rtol=1e-5)
    np.testing.assert_allclose(got_total, xv.sum(1), rtol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
def test_tanh_rnn_matches_numpy(reverse: bool) -> None:
    (final, ys), (x, h0), _ = rnn_graph(4, reverse=reverse)
    assert ys.axes == ng.make_axes([H, rec(4), N])  # REC inserted before N
    xv, hv = rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 3))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got = t.computation([final, ys], x, h0)(xv, hv)
    for g, w in zip(got, np_rnn(xv, hv, W0, U0, reverse=reverse)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_several_outputs_and_states() -> None:
    """Two sequences, two states (one without N, counting steps), three outputs (one without N)."""
    a, b = ng.placeholder([H, rec(4), N]), ng.placeholder([rec(4), N])

    def step(a_t: Op, b_t: Op, h: Op, count: Op) -> tuple[list[Op], list[Op]]:
        new = ng.tanh(a_t * b_t + h)
        return [new, new * 2.0, count], [new, count + 1.0]

    (h, count), (y1, y2, counts) = ng.scan(step, [a, b], [ng.constant(0.0, [H, N]), ng.constant(0.0, [])], rec(4))
    assert counts.axes == ng.make_axes([rec(4)])
    av, bv = rng.standard_normal((3, 4, 3)), rng.standard_normal((4, 3))
    hs, state = [], np.zeros((3, 3))
    for t in range(4):
        state = np.tanh(av[:, t] * bv[t] + state)
        hs.append(state)
    with ng.transformers.make_transformer(float_dtype="float64") as tr:
        got = tr.computation([h, count, y1, y2, counts], a, b)(av, bv)
    want = [state, 4.0, np.stack(hs, 1), 2 * np.stack(hs, 1), np.arange(4.0)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10)


def test_one_computation_runs_different_data_and_lengths() -> None:
    (final, ys), (x, h0, lens), _ = rnn_graph(5, lengths=True)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f = t.computation([final, ys], x, h0, lens)
        for seed, lv in ((1, [5, 2, 0]), (2, [1, 5, 3]), (3, [5, 5, 5])):
            data = np.random.default_rng(seed)
            xv, hv = data.standard_normal((2, 5, 3)), data.standard_normal((3, 3))
            got = f(xv, hv, np.array(lv, dtype=np.int32))
            for g, w in zip(got, np_rnn(xv, hv, W0, U0, lengths=np.array(lv))):
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


# -- variable lengths: a padded batch == each example alone -----------------------------------------


@pytest.mark.parametrize("reverse", [False, True])
def test_variable_length_batch_equals_each_example_alone(reverse: bool) -> None:
    lv = np.array([4, 1, 3], dtype=np.int32)
    xv, hv = rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 3))
    for n, length in enumerate(lv):
        xv[:, length:, n] = 1e3 * rng.standard_normal((2, 4 - length))  # garbage past each end
    (final, ys), (x, h0, lens), (w, _) = rnn_graph(4, lengths=True, reverse=reverse)
    loss = ng.sum(ys * ys) + ng.sum(final)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got_final, got_ys, got_dx = t.computation([final, ys, ng.deriv(loss, x)], x, h0, lens)(xv, hv, lv)
    n1 = ng.make_axis(1, "N")
    for n, length in enumerate(lv):
        x1, h1 = ng.placeholder([F, rec(length), n1]), ng.placeholder([H, n1])
        w1 = ng.variable([H, F], initial_value=W0)
        u1 = ng.variable([H, H2], initial_value=U0)
        final1, ys1 = ng_rnn(x1, h1, w1, u1, rec(length), reverse=reverse)
        loss1 = ng.sum(ys1 * ys1) + ng.sum(final1)
        with ng.transformers.make_transformer(float_dtype="float64") as t:
            alone = t.computation([final1, ys1, ng.deriv(loss1, x1)], x1, h1)(xv[:, :length, n:n + 1],
                                                                                   hv[:, n:n + 1])
        np.testing.assert_allclose(got_final[:, n:n + 1], alone[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got_ys[:, :length, n:n + 1], alone[1], rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(got_ys[:, length:, n], 0.0)  # zeros past the end
        np.testing.assert_allclose(got_dx[:, :length, n:n + 1], alone[2], rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(got_dx[:, length:, n], 0.0)


# -- gradients vs central finite differences (float64) ----------------------------------------------


def _finite_differences(fn: Callable[[], float], array: np.ndarray, write: Callable[[np.ndarray], None],
                        eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(array)
    for idx in np.ndindex(array.shape):
        bumped = array.copy()
        bumped[idx] += eps
        write(bumped)
        up = fn()
        bumped[idx] -= 2 * eps
        write(bumped)
        grad[idx] = (up - fn()) / (2 * eps)
    write(array)
    return grad


@pytest.mark.parametrize("lengths, reverse", [(False, False), (False, True), (True, False), (True, True)])
def test_gradients_match_finite_differences(lengths: bool, reverse: bool) -> None:
    (final, ys), placeholders, (w, u) = rnn_graph(4, lengths=lengths, reverse=reverse)
    x, h0 = placeholders[:2]
    r_ys, r_final = rng.standard_normal((3, 4, 3)), rng.standard_normal((3, 3))
    loss = ng.sum(ys * ng.constant(r_ys, ys.axes)) + ng.sum(final * ng.constant(r_final, final.axes))
    feeds = [rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 3))]
    feeds += [np.array([3, 4, 1], dtype=np.int32)] if lengths else []
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        grads = t.computation(ng.gradients(loss, [x, h0, w, u]), *placeholders)(*feeds)
        loss_fn = t.computation(loss, *placeholders)
        numeric = []
        for i in (0, 1):
            def write(v: np.ndarray, i: int = i) -> None:
                feeds[i] = v
            numeric.append(_finite_differences(lambda: float(loss_fn(*feeds)), feeds[i].copy(), write))
        for var in (w, u):
            numeric.append(_finite_differences(lambda: float(loss_fn(*feeds)), t.read_variable(var),
                                               lambda v, var=var: t.write_variable(var, v)))
    for got, want in zip(grads, numeric, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_gradient_reaches_a_variable_used_only_inside_the_step() -> None:
    (final, _), (x, h0), (w, u) = rnn_graph(3)
    scan = next(o for o in ng.ordered_ops([final]) if o.op is OpType.SCAN)
    assert w in scan.src and u in scan.src
    assert all(o.op is not OpType.VARIABLE for o in scan.arg.body.order)
    (gw,) = ng.gradients(ng.sum(final), [w])
    assert gw.axes == w.axes


def test_int_sequence_state_and_output_with_lengths() -> None:
    """Token ids in, an int step counter and a per-step argmax out; the gradient reaches the embedding."""
    vocab, steps = ng.make_axis(5, "V"), rec(4)
    emb = ng.variable([H, vocab], initial_value=rng.standard_normal((3, 5)).astype(np.float32), name="E")
    tokens, lens = ng.placeholder([steps, N], dtype="int32"), ng.placeholder([N], dtype="int32")

    def step(t_t: Op, h: Op, count: Op) -> tuple[list[Op], list[Op]]:
        new = ng.tanh(ng.dot(emb, ng.one_hot(t_t, vocab)) + h)
        return [new, ng.argmax(new, reduction_axes=[H])], [new, count + 1]

    (h, count), (hs, best) = ng.scan(step, [tokens], [ng.constant(0.0, [H, N]), ng.constant(0, [N], dtype="int32")],
                                     steps, lengths=lens)
    assert (count.dtype, best.dtype) == ("int32", "int64")
    loss = ng.sum(hs * hs) + ng.sum(h)
    tv, lv = np.array([[1, 2, 0], [3, 4, 4], [0, 1, 2], [2, 2, 1]], dtype=np.int32), np.array([4, 2, 0], np.int32)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got_hs, got_best, got_count, got_grad = t.computation([hs, best, count, ng.deriv(loss, emb)], tokens, lens)(
            tv, lv)
        loss_fn = t.computation(loss, tokens, lens)
        numeric = _finite_differences(lambda: float(loss_fn(tv, lv)), t.read_variable(emb),
                                      lambda v: t.write_variable(emb, v))
        e = t.read_variable(emb)
    state, want = np.zeros((3, 3)), np.zeros((3, 4, 3))
    for step_t in range(4):
        new = np.tanh(e[:, tv[step_t]] + state)
        state = np.where(step_t < lv, new, state)
        want[:, step_t] = np.where(step_t < lv, new, 0.0)
    np.testing.assert_allclose(got_hs, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(got_count, lv)
    np.testing.assert_array_equal(got_best, np.where(np.arange(4)[:, None] < lv, want.argmax(0), 0))
    np.testing.assert_allclose(got_grad, numeric, rtol=1e-6, atol=1e-8)


# -- compile time and graph size do not depend on the sequence length ----------------------------------


def _compile(steps: int) -> tuple[float, int]:
    (final, ys), placeholders, (w, u) = rnn_graph(steps)
    loss = ng.sum(ys) + ng.sum(final)
    results = [loss, *ng.gradients(loss, [w, u])]
    times, size = [], 0
    for _ in range(3):
        with ng.transformers.make_transformer() as t:
            start = time.perf_counter()
            f = t.computation(results, *placeholders)
            times.append(time.perf_counter() - start)
            size = len(f.graph.order)
    return statistics.median(times), size


def test_compile_time_and_op_count_do_not_grow_with_length() -> None:
    _compile(10)  # warm up imports and caches
    short, long = _compile(10), _compile(200)
    assert short[1] == long[1], f"op count {short[1]} at T=10, {long[1]} at T=200"
    assert long[0] < 1.5 * short[0] + 0.005, f"compile {long[0]:.4f}s at T=200 vs {short[0]:.4f}s at T=10"


def _gated(steps: int) -> tuple[ng.Op, ng.Op, ng.Op, ng.Op]:
    """(final, ys, x, h0) of ``h_t = sigmoid(x_t) * tanh(x_t + h) + 0.5 h``: its sigmoid and tanh are kept."""
    x, h0 = ng.placeholder([H, rec(steps), N], name="x"), ng.placeholder([H, N], name="h0")

    def step(x_t: ng.Op, h: ng.Op) -> tuple[list[ng.Op], list[ng.Op]]:
        new = ng.sigmoid(x_t) * ng.tanh(x_t + h) + h * 0.5
        return [new], [new]

    (final,), (ys,) = ng.scan(step, [x], [h0], rec(steps))
    return final, ys, x, h0


def test_gradient_values_are_stacked_step_major() -> None:
    """Pre-step states and kept values put REC first (a step is one contiguous block for the reverse
    scan), user outputs keep REC just before N, and the gradient through them is right."""
    final, ys, x, h0 = _gated(5)
    r_ys = rng.standard_normal((3, 5, 3))
    loss = ng.sum(final) + ng.sum(ys * ng.constant(r_ys, ys.axes))
    grads = ng.gradients(loss, [x, h0])
    forward = next(o.arg for o in ng.ordered_ops(grads) if o.op is OpType.SCAN and o.arg.save_states)
    assert forward.n_keep == 2  # the sigmoid and the tanh
    types = forward.result_types()
    n_state, n_out = forward.n_state, forward.n_out
    assert [a.name for a in types[n_state][0]] == ["H", "REC", "N"]  # the user's stacked output
    assert [[a.name for a in axes] for axes, _ in types[n_state + n_out:]] == [["REC", "H", "N"]] * 3
    feeds = [rng.standard_normal((3, 5, 3)), rng.standard_normal((3, 3))]
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got = t.computation(grads, x, h0)(*feeds)
        loss_fn = t.computation(loss, x, h0)
        for i, g in enumerate(got):
            def write(v: np.ndarray, i: int = i) -> None:
                feeds[i] = v
            want = _finite_differences(lambda: float(loss_fn(*feeds)), feeds[i].copy(), write)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


# -- serialization and verify ----------------------------------------------------------------------------


def test_round_trip_runs_with_gradients() -> None:
    (final, ys), (x, h0, lens), (w, u) = rnn_graph(4, lengths=True, reverse=True)
    results = [final, ys, *ng.gradients(ng.sum(ys) + ng.sum(final * final), [x, w])]
    ng.verify(results)
    loaded = ng.deserialize(ng.serialize([*results, x, h0, lens]))
    feeds = [rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 3)), np.array([2, 4, 0], dtype=np.int32)]
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        want = t.computation(results, x, h0, lens)(*feeds)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got = t.computation(loaded[:4], *loaded[4:])(*feeds)
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g, v, rtol=1e-12)


# -- typed errors ----------------------------------------------------------------------------------------


def _identity(x_t: Op, h: Op) -> tuple[list[Op], list[Op]]:
    return [x_t], [h]


@pytest.mark.parametrize("build, error, match", [
    (lambda x, h: ng.scan("step", [x], [h], rec(4)), GraphError, "expected a callable step"),
    (lambda x, h: ng.scan(_identity, [h], [h], rec(4)), AxesError, "expected the axis REC"),
    (lambda x, h: ng.scan(_identity, [x], [h], rec(5)), AxesError, "all sequences share one length"),
    (lambda x, h: ng.scan(lambda x_t, h: ([x_t], [ng.sum(h, out_axes=[N])]), [x], [h], rec(4)), AxesError,
     "new state 0 .* has axes"),
    (lambda x, h: ng.scan(lambda x_t, h: ([x_t], [ng.cast(h, "float64")]), [x], [h], rec(4)), DTypeError,
     "new state 0 .* has dtype float64"),
    (lambda x, h: ng.scan(lambda x_t, h: [x_t], [x], [h], rec(4)), GraphError, r"expected \(step_outputs"),
    (lambda x, h: ng.scan(lambda x_t, h: ([x_t], []), [x], [h], rec(4)), GraphError, "expected 1, one per"),
    (lambda x, h: ng.scan(_identity, [x], [h], rec(4), lengths=ng.placeholder([H], dtype="int32")), AxesError,
     "expected exactly the batch axis"),
    (lambda x, h: ng.scan(_identity, [x], [h], rec(4), lengths=ng.placeholder([N])), DTypeError,
     "expected an int dtype"),
    (lambda x, h: ng.scan(_identity, [x], [ng.constant(0.0, [H])], rec(4), lengths=ng.placeholder([N], "int32")),
     AxesError, "with lengths, state 0 has axes"),
])
def test_bad_inputs_raise_typed_errors(build: Callable, error: type, match: str) -> None:
    x, h = ng.placeholder([F, rec(4), N], name="x"), ng.placeholder([H, N], name="h")
    with pytest.raises(error, match=match) as info:
        build(x, h)
    assert "hint" in str(info.value)


@pytest.mark.parametrize("steps", [4, 5])  # the reverse scan's ping-pong state buffers end on either
def test_a_state_passed_through_unchanged_and_chained_states(steps: int) -> None:
    """A step that returns a state param as it is (the plan cannot write it in place: the scan copies
    states instead of chaining them) next to a chained one; forward and gradients."""
    x = ng.placeholder([H, rec(steps), N], name="x")

    def step(x_t: Op, h: Op, c: Op) -> tuple[list[Op], list[Op]]:
        new = ng.tanh(x_t + h * c)
        return [new], [new, c]

    c0 = ng.placeholder([H, N], name="c0")
    (h_final, c_final), (ys,) = ng.scan(step, [x], [ng.constant(0.0, [H, N]), c0], rec(steps))
    loss = ng.sum(ys * ys) + ng.sum(h_final)
    grads = ng.gradients(loss, [x, c0])
    xv, cv = rng.standard_normal((3, steps, 3)), rng.standard_normal((3, 3))
    values = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(float_dtype="float64", optimize=optimize) as t:
            values.append(t.computation([h_final, c_final, ys, *grads], x, c0)(xv, cv))
    h, stack = np.zeros((3, 3)), []
    for s in range(steps):
        h = np.tanh(xv[:, s] + h * cv)
        stack.append(h)
    np.testing.assert_allclose(values[0][0], h, rtol=1e-12)
    np.testing.assert_allclose(values[0][1], cv, rtol=1e-12)
    np.testing.assert_allclose(values[0][2], np.stack(stack, 1), rtol=1e-12)
    for got, want in zip(*values, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
