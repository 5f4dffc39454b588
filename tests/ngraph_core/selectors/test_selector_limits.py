"""Selector cost limits: a query longer than ``MAX_QUERY_LENGTH`` is refused with a typed error, and the
longest allowed queries answer fast on a training graph of a few hundred ops (matching is linear in
query length x graph size: no backtracking, equal sub-selectors evaluated once)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.selectors.parser import MAX_QUERY_LENGTH, parse

HANG_GUARD_SECONDS = 5.0  # a hang guard only: the longest queries below take well under 0.5 s (README)


def training_graph(layers: int = 24) -> list[ng.Op]:
    """An MLP's SGD step: ``layers`` Affine scopes (W, b, dot, bias, relu), a softmax cross-entropy and
    the weight updates, each layer's ops in its own scope (24 layers: 525 ops with the gradients)."""
    F, N, K = ng.make_axis(16, name="F"), ng.make_axis(4, name="N"), ng.make_axis(10, name="K")
    x, y = ng.placeholder([F, N], name="x"), ng.placeholder([K, N], name="y")
    h, weights = x, []
    with ng.name_scope("model", kind="Sequential", kinds=("Sequential", "Layer")):
        for n in range(layers):
            out = K if n == layers - 1 else ng.make_axis(16, name=f"H{n}")
            with ng.name_scope(f"fc{n}", kind="Affine", kinds=("Affine", "Layer")):
                W = ng.variable([out, h.axes[0]], np.full((out.length, h.axes[0].length), 0.01), name="W",
                                labels=("weight",))
                b = ng.variable([out], 0.0, name="b", labels=("bias",))
                h = ng.dot(W, h) + b
                h = ng.relu(h) if n < layers - 1 else h
            weights += [W, b]
    loss = ng.cross_entropy_multi(ng.softmax(h), y)
    step = ng.doall([ng.assign(v, v - 0.1 * g) for v, g in zip(weights, ng.gradients(loss, weights))])
    return [loss, step]


@pytest.fixture(scope="module")
def graph() -> list[ng.Op]:
    return training_graph()


def fill(unit: str, sep: str, limit: int = MAX_QUERY_LENGTH) -> str:
    """``unit`` repeated with ``sep`` between, as many times as ``limit`` characters allow."""
    return sep.join([unit] * ((limit + len(sep)) // (len(unit) + len(sep))))


def distinct(sep: str) -> str:
    """Compounds that differ (no memo helps), joined by ``sep`` up to ``MAX_QUERY_LENGTH`` characters."""
    query, n = "*", 0
    while len(query) + len(sep) + len(f"*[name*=W{n}]") <= MAX_QUERY_LENGTH:
        query, n = query + sep + f"*[name*=W{n}]", n + 1
    return query


LONG_QUERIES = {
    "a 2,000-step child chain": fill("*", ">"),
    "a 1,400-step descendant chain": fill("*", ">>"),
    "a 300-selector list": fill("Affine > Affine variable", ","),
    "300 distinct compounds, descendant steps": distinct(">>"),
    "300 distinct compounds, a list": distinct(","),
    "510 negations in one compound": "*" + fill(":not(#b)", "", MAX_QUERY_LENGTH - 1),
    "nested :has/:not around a long chain": ":has(:not(" * 8 + fill("*", " ", MAX_QUERY_LENGTH - 200) + "))" * 8,
}


def test_the_graph_has_a_few_hundred_ops(graph: list[ng.Op]) -> None:
    assert 300 <= len(ng.ordered_ops(graph)) <= 1000


@pytest.mark.parametrize("name", list(LONG_QUERIES))
def test_the_longest_allowed_queries_answer_fast(graph: list[ng.Op], name: str) -> None:
    query = LONG_QUERIES[name]
    assert len(query) <= MAX_QUERY_LENGTH
    start = time.perf_counter()
    ng.select(graph, query)
    assert time.perf_counter() - start < HANG_GUARD_SECONDS, name


def test_an_over_long_query_is_refused_with_a_typed_error(graph: list[ng.Op]) -> None:
    assert str(parse("*" + "   " * ((MAX_QUERY_LENGTH - 1) // 3))) == "*"  # exactly at the bound: accepted
    query = fill("Affine variable", ", ") + ", Affine variable"
    assert len(query) > MAX_QUERY_LENGTH
    with pytest.raises(ng.SelectorError) as info:
        ng.select(graph, query)
    message = str(info.value)
    assert f"expected a query of at most {MAX_QUERY_LENGTH} characters, received {len(query)}" in message
    assert "hint:" in message and len(message) < 500  # the query is not echoed whole
    assert info.value.column == MAX_QUERY_LENGTH + 1
