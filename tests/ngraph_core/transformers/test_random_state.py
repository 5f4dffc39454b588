"""Random streams belong to the transformer: a recompile continues them, and ``random_state`` /
``set_random_state`` reproduce the same draws, in the same or a new transformer (exact resume)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ngraph_core as ng

C, N = ng.make_axis(4, name="C"), ng.make_axis(8, name="N")


def test_state_round_trip_repeats_the_draws() -> None:
    r = ng.uniform([C, N])
    with ng.transformers.make_transformer() as t:
        f = t.computation(r)
        f()
        state = json.loads(json.dumps(t.random_state()))  # JSON-ready
        want = [f(), f()]
        t.set_random_state(state)
        got = [f(), f()]
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want[0], want[1])


def test_a_new_transformer_continues_from_a_saved_state() -> None:
    """The state is restored before the computation exists (a resumed process), then applied at compile."""
    seeded = ng.normal([C, N], seed=7, name="noise")
    shared = ng.uniform([C, N])
    with ng.transformers.make_transformer() as t1:
        f1 = t1.computation([seeded, shared])
        f1()
        state = t1.random_state()
        want = f1()
    with ng.transformers.make_transformer() as t2:
        t2.set_random_state(state)
        got = t2.computation([seeded, shared])()
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_recompile_continues_the_stream() -> None:
    r = ng.uniform([C, N], name="r")
    with ng.transformers.make_transformer() as t:
        f = t.computation(r * 1.0)
        first = f()
        ng.update_meta(r, attrs={"note": "recompile me"})
        second = f()
        assert f.recompiles == 1
    assert not np.array_equal(first, second)  # a fresh generator would have drawn `first` again


def test_one_seeded_layer_op_shares_its_stream_across_batch_sizes() -> None:
    """The same scope and name at another batch size (another op) draws from the same seeded stream."""
    M = ng.make_axis(5, name="N")
    with ng.name_scope("Dropout_0", kind="Dropout"):
        a = ng.uniform([C, N], seed=3, name="mask")
    with ng.name_scope("Dropout_0", kind="Dropout"):
        b = ng.uniform([C, M], seed=3, name="mask")
    with ng.transformers.make_transformer() as t:
        x1, x2 = t.computation(a)(), t.computation(b)()
    with ng.transformers.make_transformer() as t:
        again = t.computation(a)()
        again2 = t.computation(a)()
    np.testing.assert_array_equal(x1, again)
    np.testing.assert_array_equal(x2.ravel(), again2.ravel()[:x2.size])  # the next draws of the one stream


def test_bad_state_is_a_typed_error() -> None:
    with ng.transformers.make_transformer() as t:
        with pytest.raises(ng.NgraphError, match="random_state"):
            t.set_random_state({"nope": 1})
        t.computation(ng.uniform([C]))()
        state = t.random_state()
        state["streams"]["shared"] = {"bit_generator": "PCG64", "state": "garbage"}
        with pytest.raises(ng.NgraphError, match="does not fit"):
            t.set_random_state(state)
