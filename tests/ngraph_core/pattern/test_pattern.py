"""Pat matching, PatternMatcher indexing and composition, graph_rewrite's fixed point and guard."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.pattern import Pat, PatternMatcher, graph_rewrite, scalar_value

T = ng.OpType
C, N = ng.make_axis(4, name="C"), ng.make_axis(3, name="N")
a = ng.placeholder([C, N], name="a")
b = ng.placeholder([C, N], name="b")
i = ng.placeholder([C, N], dtype="int32", name="i")


def matches(pat: Pat, op: ng.Op) -> list[dict[str, ng.Op]]:
    return list(pat.match(op))


# -- Pat ------------------------------------------------------------------------------------------


def test_op_type_and_sets_of_op_types():
    assert matches(Pat(T.EXP), ng.exp(a))
    assert not matches(Pat(T.LOG), ng.exp(a))
    assert matches(Pat({T.EXP, T.LOG}), ng.log(a))
    assert matches(Pat(), ng.tanh(a))  # no op: anything


def test_ordered_sources_vs_any_permutation():
    x = Pat.var("x")
    ordered = Pat(T.SUB, (x, Pat(T.EXP)))
    assert matches(ordered, a - ng.exp(b))
    assert not matches(ordered, ng.exp(b) - a)
    permuted = Pat(T.SUB, [x, Pat(T.EXP)])
    assert matches(permuted, a - ng.exp(b)) and matches(permuted, ng.exp(b) - a)
    assert matches(permuted, ng.exp(b) - a)[0]["x"] is a
    assert not matches(Pat(T.SUB, (x,)), a - b)  # arity must agree


def test_every_binding_of_a_commutative_match_is_offered():
    both = matches(Pat(T.MUL, [Pat.var("p"), Pat.var("q")]), a * b)
    assert {(m["p"], m["q"]) for m in both} == {(a, b), (b, a)}


def test_dtype():
    assert matches(Pat.var("x", dtype="int32"), i)
    assert not matches(Pat.var("x", dtype="int32"), a)
    assert matches(Pat.var("x", dtype=("int32", "float32")), a)


def test_arg_value_and_predicate():
    two = ng.constant(2.0)
    assert matches(Pat(T.CONSTANT, arg=2.0), two)
    assert not matches(Pat(T.CONSTANT, arg=3.0), two)
    assert matches(Pat(T.CONSTANT, arg=lambda v: v > 1), two)
    assert not matches(Pat(T.CONSTANT, arg=lambda v: v > 5), two)
    both = ng.concat_along_axis([a, b], C)
    assert matches(Pat(T.CONCAT, arg="C"), both) and not matches(Pat(T.CONCAT, arg="N"), both)


def test_where_predicate_sees_the_whole_op():
    assert matches(Pat(T.SUM, where=lambda op: op.axes == ng.Axes([C])), ng.sum(a, out_axes=[C]))
    assert not matches(Pat(T.SUM, where=lambda op: op.axes == ng.Axes([N])), ng.sum(a, out_axes=[C]))


def test_a_name_bound_twice_must_be_the_same_op():
    square = Pat(T.MUL, (Pat.var("x"), Pat.var("x")))
    assert matches(square, a * a)[0] == {"x": a}
    assert not matches(square, a * b)


def test_cvar_and_const_see_through_broadcasts():
    scaled = a * 2.0  # mul(a, broadcast(constant 2.0))
    assert scaled.src[1].op is T.BROADCAST
    assert matches(Pat.var("x") * 2, scaled)
    assert not matches(Pat.var("x") * 3, scaled)
    (m,) = [m for m in matches(Pat.var("x") * Pat.cvar("c"), scaled) if m["x"] is a]
    assert scalar_value(m["c"]) == 2.0
    uniform = ng.constant(np.full((4, 3), 5.0), [C, N])
    varied = ng.constant(np.arange(12.0).reshape(4, 3), [C, N])
    assert matches(Pat.cvar("c"), uniform) and matches(Pat.const(5.0), uniform)
    assert not matches(Pat.cvar("c"), varied) and not matches(Pat.cvar("c"), a)
    assert scalar_value(varied) is None


def test_operator_sugar_builds_the_expected_patterns():
    x = Pat.var("x")
    assert matches(x + 0, a + 0.0) and matches(0 + x, 0.0 + a)
    assert matches(x - 1, a - 1.0) and not matches(x - 1, 1.0 - a)
    assert matches(1 - x, 1.0 - a)
    assert matches(x / 2, a / 2.0) and matches(1 / x, 1.0 / a)
    assert matches(x ** 2, a ** 2.0) and matches(-x, -a)


# -- PatternMatcher -----------------------------------------------------------------------------


def test_rules_are_indexed_by_root_op_and_wildcards_apply_everywhere():
    seen: list[str] = []

    def note(tag: str):
        def fn(**bindings):
            seen.append(tag)
            return None

        return fn

    pm = PatternMatcher([
        (Pat(T.EXP, name="e"), note("exp")),
        (Pat({T.LOG, T.TANH}, name="l"), note("log-or-tanh")),
        (Pat(name="any"), note("any")),
    ])
    assert len(pm) == 3
    pm.rewrite(ng.exp(a))
    pm.rewrite(ng.tanh(a))
    pm.rewrite(a)
    assert seen == ["exp", "any", "log-or-tanh", "any", "any"]


def test_the_first_rule_that_gives_a_replacement_wins_and_plus_composes_in_order():
    x = Pat.var("x")
    declines = PatternMatcher([(x * 1, lambda x: None)])
    to_x = PatternMatcher([(x * 1, lambda x: x)])
    to_exp = PatternMatcher([(x * 1, lambda x: ng.exp(x))])
    assert (declines + to_x + to_exp).rewrite(a * 1.0) is a
    assert (to_exp + to_x).rewrite(a * 1.0) is ng.exp(a)
    assert len(to_x + to_exp) == 2
    assert to_x.rewrite(a * 2.0) is None


def test_a_rule_returning_its_own_op_is_no_rewrite():
    x = Pat.var("x")
    pm = PatternMatcher([(Pat(T.EXP, (x,), name="e"), lambda e, x: e)])
    assert pm.rewrite(ng.exp(a)) is None


def test_replacements_are_built_in_the_scope_of_the_op_they_replace():
    x = Pat.var("x")
    pm = PatternMatcher([(x * 2, lambda x: x + x)])
    with ng.name_scope("Affine_0", kind="Affine"):
        doubled = a * 2.0
    new = pm.rewrite(doubled)
    assert [s.name for s in new.meta.scope] == ["Affine_0"]


# -- graph_rewrite -------------------------------------------------------------------------------


def test_graph_rewrite_reaches_a_fixed_point_bottom_up():
    x = Pat.var("x")
    pm = PatternMatcher([
        (x * 1, lambda x: x),  # x*1 -> x
        (x + 0, lambda x: x),  # x+0 -> x
    ])
    before = ng.exp(((a * 1.0) + 0.0) * 1.0) + (b + 0.0) * 1.0
    (after,) = graph_rewrite([before], pm)
    assert after is ng.exp(a) + b


def test_a_rewrite_can_enable_another_above_it():
    x = Pat.var("x")
    pm = PatternMatcher([
        (Pat(T.LOG, (Pat(T.EXP, (x,)),)), lambda x: x),  # log(exp(x)) -> x
        (x - x, lambda x: ng.fill_like(x, 0.0)),  # x-x -> 0 (test rule)
    ])
    (after,) = graph_rewrite([ng.log(ng.exp(a)) - a], pm)
    assert after is ng.fill_like(a, 0.0)


def test_graph_rewrite_keeps_every_root_and_shares_rewritten_ops():
    x = Pat.var("x")
    pm = PatternMatcher([(x * 1, lambda x: x)])
    shared = a * 1.0
    r1, r2, r3 = graph_rewrite([ng.exp(shared), ng.log(shared), b], pm)
    assert r1 is ng.exp(a) and r2 is ng.log(a) and r3 is b


def test_graph_rewrite_keeps_meta_names():
    x = Pat.var("x")
    pm = PatternMatcher([(x ** 2, lambda x: ng.square(x))])
    before = (ng.tanh(a) ** 2.0).named("energy")
    (after,) = graph_rewrite([before], pm)
    assert after.op is T.SQUARE and after.meta.name == "energy"
    keeps_own = ng.exp(b).named("own")
    (after,) = graph_rewrite([(ng.exp(b) * 1.0).named("outer")], PatternMatcher([(x * 1, lambda x: x)]))
    assert after is keeps_own and after.meta.name == "own"


def test_rules_that_undo_each_other_raise():
    p, q = Pat.var("p"), Pat.var("q")
    ping_pong = PatternMatcher([(p * q, lambda p, q: q * p)])  # a*b -> b*a -> a*b ...
    with pytest.raises(ng.NgraphError, match="undo each other"):
        graph_rewrite([ng.exp(a * b)], ping_pong, name="ping_pong")
    growing = PatternMatcher([(Pat(T.EXP, (p,)), lambda p: ng.exp(p * 1.0))])  # never settles
    with pytest.raises(ng.NgraphError):
        graph_rewrite([ng.exp(a)], growing)
