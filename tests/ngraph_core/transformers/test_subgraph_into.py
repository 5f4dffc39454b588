"""A sub-graph plan writing chosen roots straight into its caller's buffers (``Transformer._subgraph``'s ``into``)."""

from __future__ import annotations

import numpy as np

import ngraph_core as ng
from ngraph_core.ir import Graph

H, N, K = ng.make_axis(4, "H"), ng.make_axis(3, "N"), ng.make_axis(5, "K")
rng = np.random.default_rng(0)


def body() -> tuple[Graph, ng.Op]:
    """Roots: a sigmoid, a dot, the param itself (a view: never written into) and the sigmoid again."""
    x, w = ng.placeholder([H, N], name="x"), ng.placeholder([K, H], name="w")
    s = ng.sigmoid(x * 2.0)
    return Graph((x, w), (s, ng.dot(w, x), x, s)), s


def test_accepted_roots_are_computed_into_the_given_buffers() -> None:
    graph, _ = body()
    xv, wv = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        run = t._subgraph(graph, ((0, True), (1, True), (2, True), (3, True)))
        assert run.accepted_into == (0, 1)  # the param is a view, and the sigmoid's second place is a copy
        a, b = np.full((4, 3), np.nan), np.full((5, 3), np.nan)
        s, d, x_out, s_again = run(xv, wv, a, b)
        plain = t._subgraph(graph)  # the same body without buffers: its own plan, fresh results
        assert not hasattr(plain, "accepted_into")
        want = plain(xv, wv)
    assert s is a and d is b and s_again is a
    np.testing.assert_allclose(a, 1 / (1 + np.exp(-2 * xv)), rtol=1e-12)
    np.testing.assert_allclose(b, wv @ xv, rtol=1e-12)
    for got, w in zip((s, d, x_out, s_again), want, strict=True):
        np.testing.assert_array_equal(got, w)


def test_a_strided_buffer_only_for_kernels_that_write_one() -> None:
    """A strided buffer is taken by a one-ufunc kernel, never by a dot (np.dot needs a contiguous ``out``)
    nor by a fused program (its block loop may reshape ``out``)."""
    x, w = ng.placeholder([H, N], name="x"), ng.placeholder([K, H], name="w")
    graph = Graph((x, w), (ng.tanh(x), ng.dot(w, x), ng.tanh(x * 2.0) + 1.0))
    xv, wv = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        run = t._subgraph(graph, ((0, False), (1, False), (2, False)))
        assert run.accepted_into == (0,)
        pack = np.zeros((4, 2, 3))
        s, d, f = run(xv, wv, pack[:, 1])
    assert np.shares_memory(s, pack) and not np.shares_memory(d, pack) and not np.shares_memory(f, pack)
    np.testing.assert_allclose(pack[:, 1], np.tanh(xv), rtol=1e-12)
    np.testing.assert_allclose(f, np.tanh(2 * xv) + 1, rtol=1e-12)
    np.testing.assert_array_equal(pack[:, 0], 0)
    np.testing.assert_allclose(d, wv @ xv, rtol=1e-12)


def test_a_scan_writes_its_kept_values_into_the_pack() -> None:
    """The gated body's kept values (REC-first slots) and new state are written in place (the state
    straight into the next step's pre-step slot; the reverse scan's states into ping-pong buffers),
    and a training computation's values equal NumPy's loop and finite differences."""
    x = ng.placeholder([H, ng.make_axis(6, "REC"), N], name="x")
    w = ng.variable([H], initial_value=np.linspace(-1, 1, 4), name="w")

    def step(x_t, h):
        z = ng.sigmoid(x_t * w + h)
        new = z * h + (1.0 - z) * ng.tanh(x_t - h)
        return [new], [new]

    (final,), (ys,) = ng.scan(step, [x], [ng.constant(0.0, [H, N])], x.axes.recurrent_axis)
    (grad,) = ng.gradients(ng.sum(ys * ys) + ng.sum(final), [w])
    xv = rng.standard_normal((4, 6, 3))
    results = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(float_dtype="float64", optimize=optimize) as t:
            results.append(t.computation([final, ys, grad], x)(xv))
            if optimize:
                written = sorted(c.accepted_into for key, c in t._subgraphs.items() if isinstance(key, tuple))
                # the reverse scan: its two states (dh and w's running gradient sum); the forward:
                # roots [y, new state, sigmoid, tanh], y the new state's value, copied from its slot
                assert written == [(0, 1), (1, 2, 3)]
    for got, want in zip(*results, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # both plans chain their states: the forward and the gradient are also checked against NumPy
    wv = np.linspace(-1, 1, 4).astype(np.float32).astype(np.float64)[:, None]  # w keeps its float32 value

    def forward(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        h, ys = np.zeros((4, 3)), []
        for t in range(6):
            z = 1 / (1 + np.exp(-(xv[:, t] * w + h)))
            h = z * h + (1 - z) * np.tanh(xv[:, t] - h)
            ys.append(h)
        ys = np.stack(ys, 1)
        return h, ys, float(np.sum(ys * ys) + np.sum(h))

    want_final, want_ys, _ = forward(wv)
    np.testing.assert_allclose(results[0][0], want_final, rtol=1e-10)
    np.testing.assert_allclose(results[0][1], want_ys, rtol=1e-10)
    numeric = np.zeros(4)
    for k in range(4):
        bump = np.zeros((4, 1))
        bump[k] = 1e-6
        numeric[k] = (forward(wv + bump)[2] - forward(wv - bump)[2]) / 2e-6
    np.testing.assert_allclose(results[0][2], numeric, rtol=1e-6, atol=1e-8)


def test_a_result_concat_has_its_parts_computed_in_place() -> None:
    """The parts of a result concat write their slices of its buffer (the concat line copies nothing);
    a part read elsewhere too, or a concat that is not a result, is computed and copied as before."""
    g2 = ng.make_axis(8, "G")
    x, y = ng.placeholder([H, N], name="x"), ng.placeholder([H, N], name="y")
    parts = [ng.cast_axes(ng.tanh(x * 2.0) + y, [ng.make_axis(4, "G"), N]),
             ng.cast_axes(ng.sigmoid(y) * x, [ng.make_axis(4, "G"), N])]
    whole = ng.concat_along_axis(parts, ng.make_axis(4, "G"))
    assert whole.axes[0] == g2
    xv, yv = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    want = np.concatenate([np.tanh(2 * xv) + yv, xv / (1 + np.exp(-yv))])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f = t.computation(whole, x, y)
        assert "whole" in f.source and f.source.count("concat") == 1  # only the comment names the concat
        np.testing.assert_allclose(f(xv, yv), want, rtol=1e-12)
        also_read = t.computation([whole, ng.sum(whole * whole)], x, y)  # a result that others read: in place
        assert "whole" in also_read.source
        np.testing.assert_allclose(also_read(xv, yv)[1], np.sum(want * want), rtol=1e-12)
        shared = t.computation([whole, parts[0] * 3.0], x, y)  # part 0 is read twice: the concat copies
        assert "whole" not in shared.source
        got, three = shared(xv, yv)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(three, 3 * want[:4], rtol=1e-12)
        inner = t.computation(ng.sum(whole * whole), x, y)  # the concat lives in the arena: copied
        assert "whole" not in inner.source
        np.testing.assert_allclose(inner(xv, yv), np.sum(want * want), rtol=1e-12)


def test_a_concat_written_into_a_strided_buffer_keeps_its_parts_apart() -> None:
    """A caller's strided buffer takes the concat (its kernel copies into any strides), never its parts
    (a dot-head program needs a contiguous ``out``): the parts stay in their own buffers."""
    x, w = ng.placeholder([H, N], name="x"), ng.placeholder([K, H], name="w")
    whole = ng.concat_along_axis([ng.tanh(ng.dot(w, x)) + 1.0, ng.cast_axes(x * x - 1.0, [ng.make_axis(4, "K"), N])],
                                 K)
    xv, wv = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        run = t._subgraph(Graph((x, w), (whole,)), ((0, False),))
        assert run.accepted_into == (0,)
        pack = np.zeros((9, 2, 3))
        (got,) = run(xv, wv, pack[:, 1])
    assert np.shares_memory(got, pack)
    np.testing.assert_allclose(pack[:, 1], np.concatenate([np.tanh(wv @ xv) + 1, xv * xv - 1]), rtol=1e-12)
