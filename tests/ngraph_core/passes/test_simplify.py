"""simplify: every rule on its own example (expected graph, types, values), and whole graphs with gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import make
from ngraph_core.passes.simplify import RULES, SIMPLIFY
from ngraph_core.passes.simplify import simplify as simplify_pass

T = ng.OpType
C, N, H = ng.make_axis(4, name="C"), ng.make_axis(3, name="N"), ng.make_axis(2, name="H")
C2, N2 = ng.make_axis(4, name="C2"), ng.make_axis(3, name="N2")
C3, N3 = ng.make_axis(4, name="C3"), ng.make_axis(3, name="N3")
A, B, D = ng.make_axis(6, name="A"), ng.make_axis(2, name="B"), ng.make_axis(12, name="D")

x = ng.placeholder([C, N], name="x")
y = ng.placeholder([C, N], name="y")
i = ng.placeholder([C, N], dtype="int32", name="i")
xc = ng.placeholder([C], name="xc")
w = ng.placeholder([C, H], name="w")


def simplify(roots: list[ng.Op]) -> list[ng.Op]:
    """The pass under test, with the IR verified after it."""
    out = simplify_pass(roots)
    ng.verify(out)
    return out


def run(roots: list[ng.Op], placeholders: list[ng.Op], feeds: list[np.ndarray]) -> list[np.ndarray]:
    """Values of ``roots`` on the NumPy transformer, compiled as built (no optimizing pass)."""
    with ng.transformers.make_transformer(optimize=False) as t:
        return list(t.computation(list(roots), *placeholders)(*feeds))


def feeds_for(placeholders: list[ng.Op], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-5, 6, p.shape).astype(p.dtype) if p.dtype.startswith("int")
            else rng.uniform(0.5, 2.0, p.shape).astype(p.dtype) for p in placeholders]


def assert_same_values(before: list[ng.Op], after: list[ng.Op], placeholders: list[ng.Op]) -> None:
    ng.verify(after)
    feeds = feeds_for(placeholders)
    for want, got in zip(run(before, placeholders, feeds), run(after, placeholders, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# one example per rule, in RULES order: (before, expected)
EXAMPLES = [
    lambda: (x * 1.0, x),
    lambda: (x + 0.0, x),
    lambda: (x - 0.0, x),
    lambda: (x / 1.0, x),
    lambda: (i * 0, ng.fill_like(i, 0)),
    lambda: (i - i, ng.fill_like(i, 0)),
    lambda: (ng.negative(-x), x),
    lambda: (-x + y, y - x),
    lambda: (x - (-y), x + y),
    lambda: (x / 4.0, x * 0.25),
    lambda: (x ** 1.0, x),
    lambda: (x ** 0.0, ng.fill_like(x, 1.0)),
    lambda: (x ** 2.0, ng.square(x)),
    lambda: (x ** 0.5, ng.sqrt(x)),
    lambda: (x ** -1.0, ng.reciprocal(x)),
    lambda: (ng.log(ng.exp(x)), x),
    lambda: (ng.stop_gradient(ng.stop_gradient(x)), ng.stop_gradient(x)),
    lambda: (make(T.CUSTOM_GRADIENT, [x * 2.0, x], arg="some.registered.name"), x * 2.0),
    lambda: (ng.broadcast(ng.broadcast(xc, [C, N]), [N, H, C]), ng.broadcast(xc, [N, H, C])),
    lambda: (ng.cast_axes(ng.cast_axes(x, [C2, N2]), [C3, N3]), ng.cast_axes(x, [C3, N3])),
    lambda: (make(T.RESHAPE, [make(T.RESHAPE, [x], axes=[D])], axes=[A, B]), make(T.RESHAPE, [x], axes=[A, B])),
    lambda: (make(T.BROADCAST, [x], axes=x.axes), x),
    lambda: (make(T.CAST_AXES, [x], axes=x.axes), x),
    lambda: (make(T.RESHAPE, [x], axes=x.axes), x),
    lambda: (make(T.CAST, [x], dtype="float32"), x),
    lambda: (ng.sum(ng.broadcast(xc, [C, N]), out_axes=[C]), xc * 3),
    lambda: (ng.max(ng.broadcast(xc, [N, C]), out_axes=[C]), xc),
    lambda: (ng.dot(make(T.SUM, [x], axes=[N, C]), w), make(T.DOT, [x, w], axes=[N, H])),
    lambda: (ng.batch_dot(x, make(T.SUM, [y], axes=[N, C]), [N]), make(T.BATCH_DOT, [x, y], axes=[N])),
    lambda: (make(T.SEQUENTIAL, [x]), x),
]


def test_every_rule_has_an_example():
    assert len(EXAMPLES) == len(RULES) == len(SIMPLIFY)


@pytest.mark.parametrize("k", range(len(EXAMPLES)))
def test_rule_gives_the_expected_op_with_the_same_axes_and_dtype(k):
    before, expected = EXAMPLES[k]()
    pat, fn = RULES[k]
    bindings = next(pat.match(before), None)
    assert bindings is not None, f"rule {k} ({pat}) does not match its example"
    new = fn(**bindings)
    assert new is expected
    assert new.axes == before.axes and new.dtype == before.dtype
    assert simplify([before])[0] is expected
    ng.verify([new])


@pytest.mark.parametrize("k", range(len(EXAMPLES)))
def test_rule_keeps_values(k):
    before, expected = EXAMPLES[k]()
    placeholders = [p for p in (x, y, i, xc, w) if p in ng.ordered_ops([before])]
    assert_same_values([before], simplify([before]), placeholders)


def test_commuted_operands_match_too():
    assert simplify([1.0 * x])[0] is x
    assert simplify([0.0 + x])[0] is x
    assert simplify([y + (-x)])[0] is (y - x)


def test_whole_graph_before_and_expected_with_gradients():
    before = ng.sum((((x * 1.0 + 0.0) ** 2.0) / 4.0 + ng.log(ng.exp(y)) - (-x)) * (1.0 * y))
    expected = ng.sum((ng.square(x) * 0.25 + y + x) * y)
    assert simplify([before])[0] is expected
    roots = [before, *ng.gradients(before, [x, y])]
    after = simplify(roots)
    assert after[0] is expected
    assert_same_values(roots, after, [x, y])


def test_fixed_point_through_chains():
    assert simplify([ng.negative(ng.negative(ng.negative(-x)))])[0] is x
    chain = ng.broadcast(ng.broadcast(ng.broadcast(xc, [C, N]), [C, N, H]), [H, N, C])
    assert simplify([chain])[0] is ng.broadcast(xc, [H, N, C])
    assert simplify([ng.sum(ng.broadcast(ng.constant(2.0), [C, N]))])[0] is ng.constant(2.0) * 12


def test_a_rule_that_would_change_the_dtype_is_declined():
    one = ng.constant(1.0)  # float32: int32 * float32 is a float32 op, int x is not
    before = i * one
    assert before.dtype == "float32"
    assert simplify([before])[0] is before
    wide = x * ng.constant(2.0, dtype="float64")  # float64 op: square(x) would be float32
    assert simplify([x ** ng.constant(2.0, dtype="float64")])[0].op is T.POW
    assert simplify([wide])[0] is wide


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_float_x_times_zero_and_x_minus_x_are_kept():
    # inf*0 and inf-inf are NaN: folding them to 0 would hide a diverging value
    assert simplify([x * 0.0])[0] is x * 0.0
    assert simplify([x - x])[0] is x - x
    inf = np.full(x.shape, np.inf, dtype="float32")
    got = run(simplify([x * 0.0, x - x]), [x], [inf])
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()


def test_division_by_a_constant_becomes_a_product_only_when_safe():
    assert simplify([x / 0.0])[0] is x / 0.0
    assert simplify([x / ng.constant(2)])[0] is x * 0.5  # an int divisor: the inverse is float
    tiny = ng.constant(1e-45)  # a float32 subnormal whose reciprocal overflows
    assert simplify([x / tiny])[0] is x / tiny
    assert simplify([i / 2])[0] is i / 2  # integer division floors


def test_sum_of_copies_over_an_empty_axis_is_left_alone():
    E = ng.make_axis(0, name="E")
    before = ng.sum(ng.broadcast(xc, [C, E]), out_axes=[C])
    assert simplify([before])[0] is before


def test_names_survive_the_rewrite():
    named = ng.exp(x)
    before = (named * 1.0).named("scaled")
    (after,) = simplify([before])
    assert after is named and after.meta.name == "scaled"


def test_simplify_keeps_scopes_of_new_ops():
    with ng.name_scope("Affine_0", kind="Affine"):
        before = x ** 2.0
    (after,) = simplify([before])
    assert after.op is T.SQUARE
    assert [s.name for s in after.meta.scope] == ["Affine_0"]
