"""fold: constant subgraphs become constants; random, effects, big arrays and placeholders stay."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.passes.fold import MAX_FOLD_SIZE, KernelEvaluator, fold_op, fold_rules
from ngraph_core.passes.fold import fold as fold_pass
from ngraph_core.transformers.kernels import KERNELS, KernelContext

T = ng.OpType
C, N, K = ng.make_axis(4, name="C"), ng.make_axis(3, name="N"), ng.make_axis(5, name="K")
x = ng.placeholder([C, N], name="x")
k_value = np.random.default_rng(0).uniform(0.5, 2.0, (4, 3)).astype("float32")
k = ng.constant(k_value, [C, N])
# what the transformer hands the pipeline: its kernels, run on NumPy
EVALUATOR = KernelEvaluator(KERNELS, KernelContext)


def fold(roots: list[ng.Op]) -> list[ng.Op]:
    """The pass under test, with the IR verified after it."""
    out = fold_pass(roots, EVALUATOR)
    ng.verify(out)
    return out


def run(roots: list[ng.Op], placeholders: list[ng.Op], feeds: list[np.ndarray], **options) -> list[np.ndarray]:
    """Values of ``roots`` on the NumPy transformer, compiled as built (no optimizing pass)."""
    with ng.transformers.make_transformer(optimize=False, **options) as t:
        return list(t.computation(list(roots), *placeholders)(*feeds))


def assert_same_values(before: list[ng.Op], after: list[ng.Op], placeholders: list[ng.Op], **options) -> None:
    ng.verify(after)
    rng = np.random.default_rng(1)
    feeds = [rng.uniform(0.5, 2.0, p.shape).astype(p.dtype) for p in placeholders]
    got, want = run(after, placeholders, feeds, **options), run(before, placeholders, feeds, **options)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def only_constants(op: ng.Op) -> bool:
    return all(o.op in (T.CONSTANT, T.BROADCAST) for o in ng.ordered_ops([op]))


def test_before_and_expected_with_gradients():
    before = ng.sum(x * (ng.constant(2.0) + 1.0) + ng.max(k * 2.0, out_axes=[C]) * ng.exp(ng.constant(0.0)))
    expected = ng.sum(x * 3.0 + ng.constant(k_value.max(axis=1) * 2.0, [C]))
    assert fold([before])[0] is expected
    roots = [before, *ng.gradients(before, [x])]
    after = fold(roots)
    assert after[0] is expected
    assert_same_values(roots, after, [x])


def test_a_uniform_result_becomes_a_broadcast_scalar():
    ones = ng.constant(np.ones((4, 3), "float32"), [C, N])
    assert fold([ones * 2.0])[0] is ng.broadcast(ng.constant(2.0), [C, N])


def test_scalar_elementwise_folds_whatever_the_size():
    B, M = ng.make_axis(1000, name="B"), ng.make_axis(1000, name="M")
    big = ng.broadcast(ng.constant(2.0), [B, M]) * 3.0
    assert fold([big])[0] is ng.broadcast(ng.constant(6.0), [B, M])


def test_big_arrays_stay_for_run_time():
    B, M = ng.make_axis(300, name="B"), ng.make_axis(300, name="M")
    assert B.length * M.length > MAX_FOLD_SIZE
    before = ng.constant(np.arange(90000.0).reshape(300, 300), [B, M]) * 2.0
    assert fold([before])[0] is before
    reduced = ng.sum(ng.broadcast(ng.constant(2.0), [B, M]), out_axes=[B])  # work over 90000 elements
    assert fold([reduced])[0] is reduced


def test_random_variables_placeholders_and_effects_are_never_folded():
    v = ng.variable([C], initial_value=1.0)
    noise = ng.uniform([C], seed=0) * 2.0
    seq = ng.sequential([ng.constant(1.0), ng.constant(2.0)])
    write = ng.assign(v, ng.constant(np.arange(4.0), [C]) + 1.0)
    roots = [noise, v * 2.0, x * 2.0, seq, ng.doall([write])]
    after = fold(roots)
    assert after[:4] == roots[:4]
    assert after[4].src[0].src[1] is ng.constant(np.arange(4.0) + 1.0, [C])  # the assigned value folds


@pytest.mark.parametrize("build", [
    lambda: ng.dot(ng.constant(np.arange(12.0).reshape(4, 3), [C, N]),
                   ng.constant(np.arange(15.0).reshape(3, 5), [N, K])),
    lambda: ng.tensor_slice(k, [slice(1, 3), 0]),
    lambda: ng.flatten(k, name="CN"),
    lambda: ng.cast_axes(k, [ng.make_axis(4, name="C2"), ng.make_axis(3, name="N2")]),
    lambda: ng.concat_along_axis([k, k * 2.0], C),
    lambda: ng.pad(k, [(1, 0), (0, 2)]),
    lambda: ng.argmax(k, reduction_axes=[C]),
    lambda: ng.cast(k * 4.0, "int32"),
    lambda: ng.greater(k, 1.0),
    lambda: ng.where(ng.greater(k, 1.0), k, -k),
    lambda: ng.max(k, out_axes=[N]),
    lambda: ng.axes_with_order(ng.sum(k * 2.0, out_axes=[C, N]), [N, C]),
    lambda: ng.sqrt(ng.constant(2.0)) + ng.log1p(ng.constant(1e-3)),
], ids=["dot", "slice", "reshape", "cast_axes", "concat", "pad", "argmax", "cast", "greater", "where", "max",
        "reorder", "scalars"])
def test_every_kind_of_op_folds_to_its_run_time_value(build):
    before = build()
    (after,) = fold([before])
    assert only_constants(after) and after.axes == before.axes and after.dtype == before.dtype
    assert_same_values([before], [after], [])


def test_folded_scalars_keep_full_precision_for_float64_runs():
    third = ng.constant(1.0) / 3.0
    (after,) = fold([third])
    assert after.arg == pytest.approx(1.0 / 3.0, rel=1e-15)
    assert_same_values([third], [after], [], float_dtype="float64")


def test_fold_op_on_one_op_and_the_rule_table():
    assert fold_op(ng.constant(2.0) * 3.0, EVALUATOR) is ng.constant(6.0)
    assert len(fold_rules(EVALUATOR)) == 1


def test_fold_reaches_through_chains():
    chain = ng.maximum(ng.tensor_slice(ng.constant(np.arange(8.0), [C.with_length(8)]) * 2.0, [slice(0, 4)]) - 1.0,
                       ng.constant(1.0))
    (after,) = fold([chain])
    assert after.op is T.CONSTANT
    np.testing.assert_array_equal(after.arg.array, np.maximum(np.arange(4.0) * 2 - 1, 1))


def test_a_float32_array_that_would_round_stays_for_run_time():
    # float64 work (sum, exp) a float32 array constant cannot hold: folding it would change float64 runs
    inexact = [ng.sum(k, out_axes=[C]), ng.exp(k)]
    assert fold(inexact) == inexact
    assert_same_values(inexact, fold(inexact), [], float_dtype="float64")
    exact = ng.sum(ng.constant(np.arange(12.0).reshape(4, 3), [C, N]), out_axes=[C])  # small integers
    assert fold([exact])[0] is ng.constant(np.arange(12.0).reshape(4, 3).sum(axis=1), [C])
