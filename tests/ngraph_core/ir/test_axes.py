"""Axis and Axes are values: equality/hash agree, no duplicate names, ordered set algebra."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ngraph_core as ng
from ngraph_core import Axes, Axis

C, H, N, W = Axis("C", 4), Axis("H", 3), Axis("N", 32), Axis("W", 5)

# -- Axis -------------------------------------------------------------------------------------


def test_axis_equality_uses_name_and_length():
    assert Axis("C", 4) == Axis("C", 4)
    assert hash(Axis("C", 4)) == hash(Axis("C", 4))
    assert Axis("C", 4) != Axis("C", 5)
    assert Axis("C", 4) != Axis("D", 4)
    assert len({Axis("C", 4), Axis("C", 4)}) == 1
    assert len({Axis("C", 4), Axis("C", 5), Axis("D", 4)}) == 3
    lookup = {Axis("C", 4): "four"}
    assert lookup[Axis("C", 4)] == "four"
    assert Axis("C", 5) not in lookup


@settings(max_examples=200, deadline=None)
@given(st.sampled_from("ABC"), st.integers(0, 3), st.sampled_from("ABC"), st.integers(0, 3))
def test_axis_equality_and_hash_agree(n1, l1, n2, l2):
    a, b = Axis(n1, l1), Axis(n2, l2)
    assert (a == b) == ((n1, l1) == (n2, l2))
    if a == b:
        assert hash(a) == hash(b)
    # a set or dict never holds two equal axes, and always tells unequal ones apart
    assert len({a, b}) == (1 if a == b else 2)


def test_axis_is_immutable():
    with pytest.raises(AttributeError):
        C.length = 7  # type: ignore[misc]
    assert C.length == 4


@pytest.mark.parametrize("name, length", [("", 3), ("C", -1), ("C", 2.5), ("C", True), (3, 4)])
def test_axis_rejects_bad_name_or_length(name, length):
    with pytest.raises(ng.AxesError):
        Axis(name, length)


def test_batch_and_recurrent_axes_are_named_N_and_REC():
    assert Axis("N", 8).is_batch and not Axis("N", 8).is_recurrent
    assert Axis("REC", 8).is_recurrent and not Axis("REC", 8).is_batch
    assert not Axis("C", 8).is_batch and not Axis("C", 8).is_recurrent
    assert not Axis("n", 8).is_batch  # names are case-sensitive
    axes = Axes([C, Axis("REC", 7), N])
    assert axes.batch_axis == N
    assert axes.recurrent_axis == Axis("REC", 7)
    assert Axes([C, H]).batch_axis is None


def test_make_axis_generates_distinct_names():
    generated = [ng.make_axis(3) for _ in range(20)]
    names = [a.name for a in generated]
    assert len(set(names)) == 20
    assert all(isinstance(n, str) and n for n in names)
    assert all(a.length == 3 for a in generated)
    # generated axes never collide with each other, so they can share one Axes
    assert len(Axes(generated)) == 20


def test_make_axis_with_name():
    a = ng.make_axis(4, name="C")
    assert a == C and a.name == "C" and a.length == 4


# -- Axes: no duplicates --------------------------------------------------------------------


def test_axes_rejects_duplicate_names():
    with pytest.raises(ng.AxesError):
        Axes([C, C])
    with pytest.raises(ng.AxesError):
        Axes([C, N, Axis("C", 5)])  # same name, other length: still a duplicate name
    with pytest.raises(ng.AxesError):
        ng.make_axes([N, H, N])


def test_axes_rejects_non_axes():
    with pytest.raises(ng.AxesError):
        Axes([C, "N"])  # type: ignore[list-item]


def test_axes_is_an_ordered_hashable_value():
    assert Axes([C, N]) == Axes([C, N])
    assert hash(Axes([C, N])) == hash(Axes([C, N]))
    assert Axes([C, N]) != Axes([N, C])  # order matters
    assert Axes([C, N]).names == ("C", "N")
    assert Axes([C, N]).lengths == (4, 32)
    assert Axes([C, N]).size == 128
    assert Axes(()).size == 1
    assert isinstance(Axes([C, H, N])[1:], Axes)
    assert Axes([C, H, N])[1:] == Axes([H, N])
    assert pickle.loads(pickle.dumps(Axes([C, N]))) == Axes([C, N])


def test_axes_membership_compares_lengths():
    axes = Axes([C, N])
    assert C in axes
    assert Axis("C", 5) not in axes
    assert axes.find("C") == C
    assert axes.find("Z") is None
    assert axes.index("N") == 1


# -- Axes: set algebra keeps order ------------------------------------------------------------


def test_concatenation_keeps_order_and_rejects_overlap():
    assert Axes([C, H]) + Axes([N]) == Axes([C, H, N])
    assert Axes([N]) + Axes([C, H]) == Axes([N, C, H])
    with pytest.raises(ng.AxesError):
        Axes([C, H]) + Axes([H, N])


def test_union_is_ordered():
    assert Axes([C, H]) | Axes([N, H, W]) == Axes([C, H, N, W])
    assert Axes([N, H, W]) | Axes([C, H]) == Axes([N, H, W, C])
    assert Axes([C]) | Axes(()) == Axes([C])


def test_intersection_keeps_left_order():
    assert Axes([C, H, N]) & Axes([N, C]) == Axes([C, N])
    assert Axes([N, C]) & Axes([C, H, N]) == Axes([N, C])
    assert Axes([C]) & Axes([H]) == Axes(())


def test_difference_keeps_left_order():
    assert Axes([C, H, N, W]) - Axes([H]) == Axes([C, N, W])
    assert Axes([N, W, C]) - Axes([W, H]) == Axes([N, C])
    assert Axes([C]) - Axes([C]) == Axes(())


def test_check_compatible_raises_on_same_name_different_length():
    Axes([C, N]).check_compatible(Axes([N, H]))  # shared N, same length: fine
    Axes([C]).check_compatible(Axes([H]))  # nothing shared: fine
    with pytest.raises(ng.AxesError) as info:
        Axes([C, N]).check_compatible(Axes([Axis("N", 16)]))
    assert "N" in str(info.value) and "32" in str(info.value) and "16" in str(info.value)
    with pytest.raises(ng.AxesError):
        Axes([C, N]) | Axes([Axis("C", 5)])
    with pytest.raises(ng.AxesError):
        Axes([C, N]) & Axes([Axis("C", 5)])


_POOL = [Axis(name, length) for name, length in zip("ABCDEFG", (2, 3, 4, 5, 6, 7, 8), strict=True)]
_subsets = st.lists(st.sampled_from(_POOL), unique=True, max_size=len(_POOL))


@settings(max_examples=150, deadline=None)
@given(_subsets, _subsets)
def test_set_algebra_matches_an_ordered_list_reference(left, right):
    a, b = Axes(left), Axes(right)
    assert list(a | b) == left + [x for x in right if x not in left]
    assert list(a & b) == [x for x in left if x in right]
    assert list(a - b) == [x for x in left if x not in right]
    if not set(left) & set(right):
        assert list(a + b) == left + right
    else:
        with pytest.raises(ng.AxesError):
            a + b
    # algebra never produces duplicate names
    for result in (a | b, a & b, a - b):
        assert len(set(result.names)) == len(result)
