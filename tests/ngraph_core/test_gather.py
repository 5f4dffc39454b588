"""``gather`` / ``scatter_add`` beyond the one-line cases in ``test_ops.py``: typed errors, run-time ids out of
range, agreement with ``dot(table, one_hot(ids))``, second derivatives, and an embedding vs PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ngraph_core as ng

E, V, REC, N = ng.make_axis(3, "E"), ng.make_axis(6, "V"), ng.make_axis(2, "REC"), ng.make_axis(4, "N")
IDS = np.array([[5, 0, 0, 2], [-1, 6, 5, 5]])  # repeats, and -1 / 6 out of range
TABLE = np.random.default_rng(3).normal(size=(3, 6))


def _run(results: list[ng.Op], *feeds: tuple[ng.Op, Any], dtype: str = "float64") -> list[np.ndarray]:
    with ng.transformers.make_transformer(float_dtype=dtype) as t:
        return list(t.computation(results, *(p for p, _ in feeds))(*(v for _, v in feeds)))


def _lookup(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    valid = (ids >= 0) & (ids < table.shape[1])
    return table[:, np.where(valid, ids, 0)] * valid


@pytest.mark.parametrize("ids_dtype", ["int64", "int32", "uint8"])
def test_run_time_ids_forward_and_gradient(ids_dtype: str) -> None:
    w = ng.variable([E, V], initial_value=TABLE, dtype="float64")
    ids = ng.placeholder([REC, N], dtype=ids_dtype)
    feed = IDS if ids_dtype != "uint8" else np.where(IDS < 0, 200, IDS)
    y = ng.gather(w, ids, V)
    r = np.random.default_rng(1).normal(size=(3, 2, 4))
    grad = ng.deriv(ng.sum(y * ng.constant(r, y.axes, dtype="float64")), w)
    out, g = _run([y, grad], (ids, feed.astype(ids_dtype)))
    np.testing.assert_array_equal(out, _lookup(TABLE, feed))
    expected = np.zeros_like(TABLE)
    valid = (feed >= 0) & (feed < 6)
    np.add.at(expected, (slice(None), feed[valid]), r[:, valid])
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_matches_one_hot_dot() -> None:
    """gather is what LookupTable computed before: dot(table, one_hot(ids)), values and gradients."""
    w = ng.variable([E, V], initial_value=TABLE, dtype="float64")
    ids = ng.constant(IDS, [REC, N], dtype="int64")
    fast, slow = ng.gather(w, ids, V), ng.dot(w, ng.cast(ng.one_hot(ids, V), "float64"))
    out = _run([fast, slow, ng.deriv(ng.sum(ng.tanh(fast)), w), ng.deriv(ng.sum(ng.tanh(slow)), w)])
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12)
    np.testing.assert_allclose(out[2], out[3], rtol=1e-12)


def test_second_derivative() -> None:
    """d/dw of (d sum(gather(w)^3) / dw) goes through scatter_add's rule (a gather)."""
    w = ng.variable([E, V], initial_value=TABLE, dtype="float64")
    ids = ng.constant(IDS, [REC, N], dtype="int64")
    g = ng.deriv(ng.sum(ng.gather(w, ids, V) ** 3.0), w)
    (hess_diag,) = _run([ng.deriv(ng.sum(g), w)])
    counts = np.bincount(IDS[(IDS >= 0) & (IDS < 6)], minlength=6)
    np.testing.assert_allclose(hess_diag, 6.0 * TABLE * counts, rtol=1e-12)


def test_gather_of_a_view_and_scatter_of_a_transposed_gradient() -> None:
    x = ng.placeholder([V, E], dtype="float64")  # the table arrives transposed (axes_with_order is a view)
    ids = ng.constant(IDS, [REC, N], dtype="int64")
    y = ng.gather(ng.axes_with_order(x * 2.0, [E, V]), ids, V)
    dy = ng.constant(np.arange(24.0).reshape(4, 2, 3), [N, REC, E], dtype="float64")
    s = ng.scatter_add(ng.axes_with_order(dy, y.axes), ids, [E, V], V)
    out, acc = _run([y, s], (x, TABLE.T.copy()))
    np.testing.assert_allclose(out, _lookup(2.0 * TABLE, IDS))
    expected = np.zeros((3, 6))
    valid = (IDS >= 0) & (IDS < 6)
    np.add.at(expected, (slice(None), IDS[valid]), np.arange(24.0).reshape(4, 2, 3).transpose(2, 1, 0)[:, valid])
    np.testing.assert_allclose(acc, expected)


def test_embedding_vs_torch() -> None:
    """forward and weight gradient vs torch.nn.functional.embedding (in-range ids; W here is [E, V])."""
    torch = pytest.importorskip("torch")
    ids_np = np.where((IDS >= 0) & (IDS < 6), IDS, 3)
    w = ng.variable([E, V], initial_value=TABLE, dtype="float64")
    y = ng.gather(w, ng.constant(ids_np, [REC, N], dtype="int64"), V)
    out, g = _run([y, ng.deriv(ng.sum(ng.sin(y)), w)])
    wt = torch.tensor(TABLE.T, requires_grad=True)
    yt = torch.nn.functional.embedding(torch.tensor(ids_np), wt)  # [REC, N, E]
    yt.sin().sum().backward()
    np.testing.assert_allclose(out, yt.detach().numpy().transpose(2, 0, 1), rtol=1e-12)
    np.testing.assert_allclose(g, wt.grad.numpy().T, rtol=1e-12)


def test_float_ids_raise() -> None:
    with pytest.raises(ng.DTypeError, match=r"gather: expected integer ids .*received float32.*hint: ng.cast"):
        ng.gather(ng.placeholder([E, V]), ng.placeholder([N]), V)


def test_bool_ids_raise() -> None:
    with pytest.raises(ng.DTypeError, match=r"expected integer ids .*received bool"):
        ng.gather(ng.placeholder([E, V]), ng.placeholder([N], dtype="bool"), V)


def test_table_without_the_axis_raises() -> None:
    with pytest.raises(ng.AxesError, match=r"gather: expected a table with an axis named 'V', received \[E:3, N:4\]"):
        ng.gather(ng.placeholder([E, N]), ng.placeholder([REC], dtype="int64"), V)


def test_ids_sharing_a_table_axis_name_raise() -> None:
    with pytest.raises(ng.AxesError, match=r"share the axis name\(s\) \['E'\].*hint: rename"):
        ng.gather(ng.placeholder([E, V]), ng.placeholder([E], dtype="int64"), V)


def test_axis_of_wrong_type_raises() -> None:
    with pytest.raises(ng.AxesError, match=r"gather: expected the looked-up axis as an Axis or its name, received int"):
        ng.gather(ng.placeholder([E, V]), ng.placeholder([N], dtype="int64"), 1)  # type: ignore[arg-type]


def test_scatter_add_with_wrong_updates_raises() -> None:
    ids = ng.placeholder([N], dtype="int64")
    with pytest.raises(ng.AxesError, match=r"scatter_add: expected updates with the axes of gather.*\[E:3, N:4\]"):
        ng.scatter_add(ng.placeholder([N, E]), ids, [E, V], V)


def test_an_out_of_range_id_is_named_by_its_position_in_a_2d_ids_array() -> None:
    """The raising gather reports where the bad id sits (C order), computed on the host for any backend."""
    V, D = ng.make_axis(5, name="V"), ng.make_axis(3, name="D")
    R, S = ng.make_axis(2, name="R"), ng.make_axis(3, name="S")
    table, ids = ng.placeholder([V, D]), ng.placeholder([R, S], dtype="int64")
    out = ng.gather(table, ids, "V", out_of_range="raise")
    fed = np.array([[0, 1, 4], [-5, 7, 2]])
    with ng.transformers.make_transformer() as t:
        f = t.computation(out, table, ids)
        with pytest.raises(ng.IndexRangeError, match=r"index 7 at position \(1, 1\)"):
            f(np.zeros((5, 3), np.float32), fed)
