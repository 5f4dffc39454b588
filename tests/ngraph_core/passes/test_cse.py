"""cse: ops equal but for their scope merge into the first; unique and effectful ops never merge."""

from __future__ import annotations

import numpy as np

import ngraph_core as ng
from ngraph_core.passes.cse import cse as cse_pass

C, N = ng.make_axis(4, name="C"), ng.make_axis(3, name="N")
x = ng.placeholder([C, N], name="x")
w = ng.placeholder([C], name="w")


def cse(roots: list[ng.Op]) -> list[ng.Op]:
    """The pass under test, with the IR verified after it."""
    out = cse_pass(roots)
    ng.verify(out)
    return out


def run(roots: list[ng.Op], placeholders: list[ng.Op], feeds: list[np.ndarray]) -> list[np.ndarray]:
    """Values of ``roots`` on the NumPy transformer, compiled as built (no optimizing pass)."""
    with ng.transformers.make_transformer(optimize=False) as t:
        return list(t.computation(list(roots), *placeholders)(*feeds))


def assert_same_values(before: list[ng.Op], after: list[ng.Op], placeholders: list[ng.Op]) -> None:
    ng.verify(after)
    rng = np.random.default_rng(0)
    feeds = [rng.uniform(0.5, 2.0, p.shape).astype(p.dtype) for p in placeholders]
    for got, want in zip(run(after, placeholders, feeds), run(before, placeholders, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def layer(scope: str, h: ng.Op) -> ng.Op:
    with ng.name_scope(scope, kind="Affine"):
        return ng.tanh(h * w + 1.0)


def test_before_and_expected_with_gradients():
    a, b = layer("Affine_0", x), layer("Affine_1", x)
    assert a is not b
    before = ng.sum(a * b)
    expected = ng.sum(a * a)
    assert cse([before])[0] is expected
    roots = [before, *ng.gradients(before, [x, w])]
    after = cse(roots)
    assert after[0] is expected
    assert_same_values(roots, after, [x, w])
    assert len(ng.ordered_ops(after)) < len(ng.ordered_ops(roots))


def test_the_first_in_topological_order_survives_with_its_metadata():
    a, b = layer("Affine_0", x), layer("Affine_1", x)
    first, second = cse([b, a])
    assert first is b and second is b
    assert [s.name for s in first.meta.scope] == ["Affine_1"]


def test_merging_reaches_ops_above_the_merged_ones():
    a, b = layer("Affine_0", x), layer("Affine_1", x)
    with ng.name_scope("Head_0"):
        ha = ng.sum(a)
    with ng.name_scope("Head_1"):
        hb = ng.sum(b)
    ra, rb = cse([ha, hb])
    assert ra is rb is ha


def test_unique_and_effectful_ops_never_merge():
    with ng.name_scope("a"):
        ra = ng.uniform([C], seed=1) * 2.0
        va = ng.variable([C], initial_value=0.0)
    with ng.name_scope("b"):
        rb = ng.uniform([C], seed=1) * 2.0
        vb = ng.variable([C], initial_value=0.0)
    new_ra, new_rb, new_va, new_vb = cse([ra, rb, va, vb])
    assert new_ra.src[0] is not new_rb.src[0]  # two draws stay two draws
    assert new_ra.src[1] is new_rb.src[1]  # while the constant 2.0 of the two scopes merges
    assert (new_va, new_vb) == (va, vb)
    v = ng.variable([C], initial_value=0.0)
    with ng.name_scope("a"):
        wa = ng.assign(v, w)
    with ng.name_scope("b"):
        wb = ng.assign(v, w)
    effects = ng.doall([wa, wb])
    assert cse([effects]) == [effects]


def test_a_graph_without_duplicates_is_returned_as_is():
    roots = [layer("Affine_0", x), ng.sum(x)]
    after = cse(roots)
    assert all(n is o for n, o in zip(after, roots, strict=True))
