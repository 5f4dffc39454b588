"""Property: the optimizing passes never change what a random graph computes, forward or backward.

Hypothesis builds small graphs over three named axes from a table of ops (element-wise,
reductions, reorders, dot, constants, the same layer in two scopes, and the identities
the simplifier looks for), differentiates them, optionally adds an update, and runs
them before and after ``simplify -> fold -> cse -> dce -> decompose -> layout`` on the
NumPy transformer. Values stay positive where ``log``/``sqrt``/``pow`` need it. The runs
are float64 so that only the passes, not float32 rounding, could make a difference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ngraph_core as ng
from ngraph_core.passes.cse import cse
from ngraph_core.passes.dce import dce
from ngraph_core.passes.decompose import make_decompose
from ngraph_core.passes.fold import KernelEvaluator, fold
from ngraph_core.passes.layout import layout
from ngraph_core.passes.simplify import simplify
from ngraph_core.transformers.kernels import KERNELS, KernelContext

EVALUATOR = KernelEvaluator(KERNELS, KernelContext)

T = ng.OpType
AXES = [ng.make_axis(2, name="A"), ng.make_axis(3, name="B"), ng.make_axis(4, name="C")]
INPUTS = [ng.placeholder(AXES[:2], name="p0"), ng.placeholder(AXES[1:], name="p1"),
          ng.placeholder([AXES[2], AXES[0]], name="p2")]
FEEDS = [np.random.default_rng(k).uniform(0.5, 1.5, p.shape) for k, p in enumerate(INPUTS)]
DECOMPOSED = frozenset({T.RSQRT, T.SQUARE, T.SIGMOID, T.TANH, T.RECIPROCAL, T.RELU, T.ABS, T.NEG, T.SUB})


def positive(x: ng.Op) -> ng.Op:
    return ng.abs(x) + 0.5


UNARY: dict[str, Callable[[ng.Op], ng.Op]] = {
    "neg": lambda x: -x,
    "tanh": ng.tanh,
    "sigmoid": ng.sigmoid,
    "relu": lambda x: ng.relu(x - 1.0),
    "exp": lambda x: ng.exp(ng.tanh(x)),
    "log": lambda x: ng.log(positive(x)),
    "sqrt": lambda x: ng.sqrt(positive(x)),
    "rsqrt": lambda x: ng.rsqrt(positive(x)),
    "square": lambda x: ng.square(ng.tanh(x)),
    "times_one": lambda x: 1.0 * x,
    "plus_zero": lambda x: x + 0.0,
    "minus_zero": lambda x: x - 0.0,
    "over_one": lambda x: x / 1.0,
    "over_const": lambda x: x / 4.0,
    "pow_one": lambda x: x ** 1.0,
    "pow_two": lambda x: ng.tanh(x) ** 2.0,
    "pow_half": lambda x: positive(x) ** 0.5,
    "pow_minus_one": lambda x: positive(x) ** -1.0,
    "neg_neg": lambda x: ng.negative(-x),
    "log_exp": lambda x: ng.log(ng.exp(ng.tanh(x))),
    "stop_stop": lambda x: ng.stop_gradient(ng.stop_gradient(x)) + x,
    "folded_scale": lambda x: x * (ng.constant(2.0) - ng.constant(1.5)),
}
BINARY: dict[str, Callable[[ng.Op, ng.Op], ng.Op]] = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "max": ng.maximum,
    "neg_plus": lambda x, y: -x + y,
    "minus_neg": lambda x, y: x - (-y),
    "div": lambda x, y: x / positive(y),
}


def _in_scope(scope: str, x: ng.Op) -> ng.Op:
    with ng.name_scope(scope, kind="Affine"):
        return ng.tanh(x * 0.5 + 1.0)


def _aligned(x: ng.Op, y: ng.Op) -> tuple[ng.Op, ng.Op]:
    if x.axes.is_subset_of(y.axes) or y.axes.is_subset_of(x.axes):
        return x, y
    union = x.axes | y.axes
    return ng.broadcast(x, union), ng.broadcast(y, union)


@st.composite
def graphs(draw: st.DrawFn) -> list[ng.Op]:
    """A few ops built from the inputs (and constants) by the tables above; returns the results."""
    pool: list[ng.Op] = list(INPUTS)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "reduce", "reorder", "reorder", "dot",
                                     "const", "twin"]))
        x = draw(st.sampled_from(pool))
        if kind == "unary":
            pool.append(UNARY[draw(st.sampled_from(sorted(UNARY)))](x))
        elif kind == "binary":
            y = draw(st.sampled_from(pool))
            pool.append(BINARY[draw(st.sampled_from(sorted(BINARY)))](*_aligned(x, y)))
        elif kind == "reduce" and len(x.axes):
            kept = draw(st.lists(st.sampled_from(list(x.axes)), unique=True, max_size=len(x.axes) - 1))
            reduce = draw(st.sampled_from([ng.sum, ng.max, ng.mean]))
            pool.append(reduce(x, out_axes=draw(st.permutations(kept))))
        elif kind == "reorder" and len(x.axes) > 1:
            pool.append(ng.axes_with_order(x, draw(st.permutations(list(x.axes)))))
        elif kind == "twin":  # one layer built in two scopes: CSE merges them
            pool.append(_in_scope("L0", x) * _in_scope("L1", x))
        elif kind == "dot":
            pool.append(ng.dot(x, draw(st.sampled_from(pool))))
        elif kind == "const":
            axes = draw(st.lists(st.sampled_from(AXES), unique=True, max_size=2))
            value = np.random.default_rng(draw(st.integers(0, 9))).uniform(0.5, 1.5, [a.length for a in axes])
            c = ng.constant(value, axes) * 2.0  # folds
            pool.append(ng.add(*_aligned(x, c)))
    results = pool[len(INPUTS):] or [INPUTS[0] * 1.0]
    return results[-draw(st.integers(1, min(3, len(results)))):]


def optimize(roots: list[ng.Op], decompose: bool) -> list[ng.Op]:
    passes = [simplify, functools.partial(fold, evaluator=EVALUATOR), cse, dce] \
        + ([make_decompose(frozenset(T) - DECOMPOSED)] if decompose else [])
    for graph_pass in passes + [layout]:
        roots = graph_pass(roots)
        ng.verify(roots)
    return roots


def run(roots: list[ng.Op], variables: list[ng.Op]) -> list:
    with ng.transformers.make_transformer(optimize=False, float_dtype="float64") as t:
        values = list(t.computation(roots, *INPUTS)(*FEEDS))
        return values + [t.read_variable(v) for v in variables]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.booleans(), st.booleans())
def test_passes_keep_values_and_gradients(results: list[ng.Op], decompose: bool, update: bool):
    loss = ng.sum(ng.stack([ng.sum(r * 0.25) for r in results], ng.make_axis(len(results), name="R")))
    used = [p for p in INPUTS if p in ng.ordered_ops([loss])]
    roots = [loss, *ng.gradients(loss, used), *results]
    variables = []
    if update:
        v = ng.variable([], initial_value=1.0, name="v")
        variables.append(v)
        roots.append(ng.doall([ng.assign(v, v + loss), loss * 2.0, ng.assign(v, v)]))
    after = optimize(roots, decompose)
    want, got = run(roots, variables), run(after, variables)
    for w, g in zip(want, got, strict=True):
        if w is None:
            assert g is None
            continue
        scale = 1.0 + np.max(np.abs(w), initial=0.0)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7 * scale)
