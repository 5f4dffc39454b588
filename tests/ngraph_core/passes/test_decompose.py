"""decompose: ops a backend lacks become ops it has; supported ops are left alone."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import make
from ngraph_core.passes.decompose import DECOMPOSE, RULES, make_decompose
from ngraph_core.passes.decompose import decompose as decompose_pass

T = ng.OpType
ALL = frozenset(T)
C, N = ng.make_axis(4, name="C"), ng.make_axis(3, name="N")
x = ng.placeholder([C, N], name="x")
y = ng.placeholder([C, N], name="y")
i = ng.placeholder([C, N], dtype="int32", name="i")


def decompose(roots: list[ng.Op], supported: frozenset[ng.OpType]) -> list[ng.Op]:
    """The pass under test, with the IR verified after it."""
    out = decompose_pass(roots, supported)
    ng.verify(out)
    return out


def run(roots: list[ng.Op], placeholders: list[ng.Op], feeds: list[np.ndarray]) -> list[np.ndarray]:
    """Values of ``roots`` on the NumPy transformer, compiled as built (no optimizing pass)."""
    with ng.transformers.make_transformer(optimize=False) as t:
        return list(t.computation(list(roots), *placeholders)(*feeds))


def feeds_for(placeholders: list[ng.Op]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(-5, 6, p.shape).astype(p.dtype) if p.dtype == "int32"
            else rng.uniform(-2.0, 2.0, p.shape).astype(p.dtype) for p in placeholders]


def assert_same_values(before: list[ng.Op], after: list[ng.Op], placeholders: list[ng.Op]) -> None:
    ng.verify(after)
    feeds = feeds_for(placeholders)
    for got, want in zip(run(after, placeholders, feeds), run(before, placeholders, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def positive(v: ng.Op) -> ng.Op:
    return ng.abs(v) + 0.5


# one example per rule, in RULES order: (before, expected with the op unsupported)
EXAMPLES = [
    lambda: (ng.rsqrt(positive(x)), ng.reciprocal(ng.sqrt(positive(x)))),
    lambda: (ng.reciprocal(positive(x)), 1.0 / positive(x)),
    lambda: (ng.square(x), x * x),
    lambda: (ng.sigmoid(x), 1.0 / (1.0 + ng.exp(-x))),
    lambda: (ng.tanh(x), 1.0 - 2.0 / (ng.exp(2.0 * x) + 1.0)),
    lambda: (ng.log1p(positive(x)), ng.log(1.0 + positive(x))),
    lambda: (ng.relu(x), ng.maximum(x, 0.0)),
    lambda: (ng.abs(i), ng.maximum(i, -i)),
    lambda: (-i, i * -1),
    lambda: (x - y, x + y * -1.0),
]


def test_every_rule_has_an_example():
    assert len(EXAMPLES) == len(RULES) == len(DECOMPOSE)


@pytest.mark.parametrize("k", range(len(EXAMPLES)))
def test_an_unsupported_op_becomes_its_decomposition(k):
    before, expected = EXAMPLES[k]()
    kind = RULES[k][0].ops
    (after,) = decompose([before], ALL - kind)
    assert after is expected
    assert after.axes == before.axes and after.dtype == before.dtype
    placeholders = [p for p in (x, y, i) if p in ng.ordered_ops([before])]
    assert_same_values([before], [after], placeholders)


@pytest.mark.parametrize("k", range(len(EXAMPLES)))
def test_a_supported_op_is_left_alone(k):
    before, _ = EXAMPLES[k]()
    assert decompose([before], ALL) == [before]


def test_decompositions_chain_down_to_what_the_backend_has():
    before = ng.rsqrt(positive(x)) - ng.tanh(x)
    no_rsqrt = ALL - {T.RSQRT, T.RECIPROCAL, T.TANH, T.SUB, T.NEG}
    (after,) = decompose([before], no_rsqrt)
    assert not {o.op for o in ng.ordered_ops([after])} & {T.RSQRT, T.RECIPROCAL, T.TANH, T.SUB, T.NEG}
    assert_same_values([before], [after], [x])


def test_make_decompose_gives_a_named_pass_and_gradients_keep_their_values():
    cpu_pass = make_decompose(ALL - {T.SQUARE, T.TANH, T.RSQRT})
    assert callable(cpu_pass) and cpu_pass.__name__ == "decompose_unsupported"
    loss = ng.sum(ng.square(ng.tanh(x * y)) + ng.rsqrt(positive(y)))
    roots = [loss, *ng.gradients(loss, [x, y])]
    after = cpu_pass(roots)
    assert not {o.op for o in ng.ordered_ops(after)} & {T.SQUARE, T.TANH, T.RSQRT}
    assert_same_values(roots, after, [x, y])


def test_ops_without_a_rule_stay_for_the_transformer_to_report():
    before = ng.exp(x)
    assert decompose([before], ALL - {T.EXP}) == [before]


def test_saturating_forms_stay_finite():
    big = ng.constant(np.array([-100.0, -30.0, 30.0, 100.0], "float32"), [C])
    (after,) = decompose([ng.tanh(big)], ALL - {T.TANH})
    with np.errstate(over="ignore"):
        (got,) = run([after], [], [])
    np.testing.assert_allclose(got, np.tanh([-100.0, -30.0, 30.0, 100.0]), rtol=1e-6)


TAIL = np.array([-20.0, -6.0, 0.5, 20.0])


def test_sigmoid_decomposition_is_accurate_in_the_tails():
    z = ng.constant(TAIL.astype("float32"), [C])
    (after,) = decompose([ng.sigmoid(z)], ALL - {T.SIGMOID})
    np.testing.assert_allclose(run([after], [], [])[0], 1 / (1 + np.exp(-TAIL)), rtol=1e-6)


def test_sigmoid_kernel_is_accurate_in_the_tails():
    z = ng.constant(TAIL.astype("float32"), [C])
    np.testing.assert_allclose(run([ng.sigmoid(z)], [], [])[0], 1 / (1 + np.exp(-TAIL)), rtol=1e-6)


def test_relu_of_inf_stays_inf():
    (after,) = decompose([ng.relu(x)], ALL - {T.RELU})
    inf = np.full(x.shape, np.inf, "float32")
    assert np.isinf(run([after], [x], [inf])[0]).all()
    assert make(T.RELU, [x]) is ng.relu(x)
