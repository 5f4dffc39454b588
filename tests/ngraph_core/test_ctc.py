"""``ng.ctc_loss``: loss and gradient against PyTorch's ``F.ctc_loss`` and against enumerating paths,
long sequences, impossible alignments, and the typed errors."""

from __future__ import annotations

import json
from typing import Any

import ctc_reference as ctc_ref
import numpy as np
import pytest
from op_helper import arg, check_op

import ngraph_core as ng
from ngraph_core import OpType
from ngraph_core.errors import SerializationError
from ngraph_core.ir import ARG_TYPES, CodecContext
from ngraph_core.ir.ctc import CTCArg

torch = pytest.importorskip("torch")


def random_batch(seed: int, T: int, N: int, C: int, L: int, blank: int) -> dict[str, np.ndarray]:
    """Logits ``(C, T, N)``, labels ``(L, N)`` with repeats, lengths with 0 labels and short inputs."""
    rng = np.random.default_rng(seed)
    ll = rng.integers(0, L + 1, N)
    ll[0] = 0
    labels = rng.choice([k for k in range(C) if k != blank], size=(L, N))
    labels[1, :] = labels[0, :]  # "aa": a blank must separate them
    needed = ll + np.array([np.sum(labels[1:n, i] == labels[:n - 1, i]) if n else 0 for i, n in enumerate(ll)])
    il = np.maximum(rng.integers(T // 2, T + 1, N), needed)
    il[-1] = T
    logits = (rng.standard_normal((C, T, N)) * 2).astype(np.float32).astype(np.float64)
    return {"logits": logits, "labels": labels.astype(np.int32), "il": il.astype(np.int32), "ll": ll.astype(np.int32)}


def run_ours(b: dict[str, np.ndarray], blank: int, float_dtype: str = "float64", zero_infinity: bool = False,
             weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Our losses ``[N]`` and ``d sum(loss * weights) / d logits``."""
    C, T, N = b["logits"].shape
    ca, ta, na, la = (ng.make_axis(n, s) for n, s in ((C, "C"), (T, "REC"), (N, "N"), (b["labels"].shape[0], "L")))
    x = ng.placeholder([ca, ta, na])
    y = ng.placeholder([la, na], dtype="int32")
    il, ll = ng.placeholder([na], dtype="int32"), ng.placeholder([na], dtype="int32")
    loss = ng.ctc_loss(x, y, il, ll, blank=blank, zero_infinity=zero_infinity)
    w = np.ones(N) if weights is None else weights
    (g,) = ng.gradients(ng.sum(loss * ng.constant(w, [na])), [x])
    with ng.transformers.make_transformer(float_dtype=float_dtype) as t:
        return t.computation([loss, g], x, y, il, ll)(b["logits"], b["labels"], b["il"], b["ll"])


def run_torch(b: dict[str, np.ndarray], blank: int, zero_infinity: bool = False,
              weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    x = torch.tensor(b["logits"].transpose(1, 2, 0), requires_grad=True)
    loss = torch.nn.functional.ctc_loss(x.log_softmax(2), torch.tensor(b["labels"].T, dtype=torch.int64),
                                        torch.tensor(b["il"], dtype=torch.int64),
                                        torch.tensor(b["ll"], dtype=torch.int64), blank=blank, reduction="none",
                                        zero_infinity=zero_infinity)
    w = torch.ones(x.shape[1], dtype=torch.float64) if weights is None else torch.tensor(weights)
    (g,) = torch.autograd.grad((loss * w).sum(), x)
    return loss.detach().numpy(), g.numpy().transpose(2, 0, 1)


@pytest.mark.parametrize("seed, T, N, C, L, blank", [
    (0, 12, 5, 6, 4, 0), (1, 30, 7, 5, 8, 4), (2, 20, 4, 29, 6, 13), (3, 9, 6, 3, 4, 1), (4, 50, 3, 10, 20, 0),
])
def test_against_torch(seed: int, T: int, N: int, C: int, L: int, blank: int) -> None:
    """Random lengths (label length 0, short inputs), repeated labels, blanks anywhere, weighted examples."""
    b = random_batch(seed, T, N, C, L, blank)
    weights = np.random.default_rng(seed + 100).uniform(0.5, 2.0, N)
    loss, grad = run_ours(b, blank, weights=weights)
    ref_loss, ref_grad = run_torch(b, blank, weights=weights)
    assert loss.dtype == np.float64 and loss.shape == (N,) and grad.shape == b["logits"].shape
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-10)
    np.testing.assert_allclose(grad, ref_grad, atol=1e-10)
    loss32, grad32 = run_ours(b, blank, float_dtype="float32", weights=weights)
    assert loss32.dtype == np.float32
    np.testing.assert_allclose(loss32, ref_loss, rtol=1e-5)
    np.testing.assert_allclose(grad32, ref_grad, atol=2e-5)  # torch in float32: up to 2e-5 off on these


def test_against_enumerated_paths() -> None:
    """Loss and gradient equal the sums over every path of a tiny batch (blank 2, a repeat, length 0)."""
    b = {"logits": np.random.default_rng(5).normal(size=(3, 5, 3)),
         "labels": np.array([[1, 0, 1], [1, 1, 0]], dtype=np.int32),
         "il": np.array([5, 4, 2], dtype=np.int32), "ll": np.array([2, 2, 0], dtype=np.int32)}
    loss, grad = run_ours(b, blank=2)
    ref_loss, ref_grad = ctc_ref.ctc_batch(b["logits"], b["labels"], b["il"], b["ll"], blank=2)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, atol=1e-12)


def test_finite_differences() -> None:
    """Float64 gradient vs central differences, labels [L, N] given in [N, L] order, blank 1."""
    N, L = ng.make_axis(2, "N"), ng.make_axis(2, "L")
    inputs = [arg(N, ng.make_axis(3, "C"), ng.make_axis(4, "REC")),
              arg(N, L, values=[[2, 2], [0, 2]], dtype="int32"),
              arg(N, values=[4, 3], dtype="int32"), arg(N, values=[2, 1], dtype="int32")]
    check_op(lambda x, y, il, ll: ng.ctc_loss(x, y, il, ll, blank=1), None, inputs, covers=[OpType.CTC])


def test_long_sequence_stays_finite() -> None:
    """T = 1000 frames of confident logits: probabilities underflow, log space does not.

    In float32 the log-likelihoods (~ -10^4) keep about 3 decimals after the point, which bounds
    the posteriors' accuracy; ours are within 2e-3 of float64 (torch's float32 within 1.1e-2).
    """
    b = random_batch(7, 1000, 3, 6, 40, 0)
    b["logits"] *= 10.0  # p(path) ~ exp(-thousands)
    ref_loss, ref_grad = run_torch(b, 0)
    assert np.all(ref_loss > 1000)
    loss, grad = run_ours(b, 0)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, atol=1e-9)
    loss, grad = run_ours(b, 0, float_dtype="float32")
    assert np.all(np.isfinite(loss)) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    np.testing.assert_allclose(grad, ref_grad, atol=2e-3)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignment(zero_infinity: bool) -> None:
    """Labels "1 1 1" need 5 frames; with 3 the loss is inf (gradient NaN), or 0 with zero_infinity, as torch."""
    b = {"logits": np.random.default_rng(2).normal(size=(4, 3, 2)),
         "labels": np.array([[1, 2], [1, 0], [1, 0]], dtype=np.int32),
         "il": np.array([3, 3], dtype=np.int32), "ll": np.array([3, 1], dtype=np.int32)}
    loss, grad = run_ours(b, 0, zero_infinity=zero_infinity)
    ref_loss, ref_grad = run_torch(b, 0, zero_infinity=zero_infinity)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-10)
    np.testing.assert_allclose(grad, ref_grad, atol=1e-10)  # NaN where torch has NaN
    assert (loss[0] == 0.0) if zero_infinity else np.isinf(loss[0])


# -- errors ---------------------------------------------------------------------------------------------

C, T, N, L = ng.make_axis(4, "C"), ng.make_axis(5, "REC"), ng.make_axis(2, "N"), ng.make_axis(3, "L")


def _sources(**over: Any) -> list[Any]:
    src = {"x": ng.placeholder([C, T, N]), "y": ng.placeholder([L, N], dtype="int32"),
           "il": ng.placeholder([N], dtype="int32"), "ll": ng.placeholder([N], dtype="int32")}
    src.update(over)
    return [src[k] for k in ("x", "y", "il", "ll")]


@pytest.mark.parametrize("over, kw, error, match", [
    ({"x": ng.placeholder([C, ng.make_axis(5, "T"), N])}, {}, ng.AxesError, "time axis REC"),
    ({"x": ng.placeholder([C, ng.make_axis(3, "H"), T, N])}, {}, ng.AxesError, "one class axis"),
    ({"x": ng.placeholder([C, T, N], dtype="int32")}, {}, ng.DTypeError, "float32 or float64 logits"),
    ({"y": ng.placeholder([L, N])}, {}, ng.DTypeError, "int labels"),
    ({"y": ng.placeholder([L, ng.make_axis(3, "N")], dtype="int32")}, {}, ng.AxesError, "labels"),
    ({"il": ng.placeholder([L], dtype="int32")}, {}, ng.AxesError, "input_lengths"),
    ({"ll": ng.placeholder([N])}, {}, ng.DTypeError, "int label_lengths"),
    ({}, {"blank": 4}, ng.AxesError, r"blank class id in \[0, 4\)"),
    ({}, {"blank": 1.0}, ng.DTypeError, "int blank"),
    ({"y": np.zeros((3, 2))}, {}, ng.DTypeError, "integer labels"),
    ({"il": np.zeros(3, dtype=np.int32)}, {}, ng.AxesError, r"input_lengths of shape \(2,\)"),
])
def test_build_errors(over: dict, kw: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ng.ctc_loss(*_sources(**over), **kw)


@pytest.mark.parametrize("labels, il, ll, match", [
    ([[1, 2], [4, 1], [1, 1]], [5, 5], [3, 1], r"labels in \[0, 4\) other than the blank 0, received 4 at "
                                                r"position 1 of example 0"),
    ([[1, 2], [0, 1], [1, 1]], [5, 5], [3, 1], "received 0 at position 1 of example 0"),
    ([[1, 2], [2, 1], [1, 1]], [5, 6], [3, 1], r"input_lengths in \[0, 5\]"),
    ([[1, 2], [2, 1], [1, 1]], [5, 5], [3, -1], r"label_lengths in \[0, 3\]"),
])
def test_run_time_errors(labels: list, il: list, ll: list, match: str) -> None:
    """Labels and lengths are data: checked when the op runs; padding beyond a label length is not read."""
    x, y, ilp, llp = _sources()
    with ng.transformers.make_transformer() as t:
        f = t.computation(ng.ctc_loss(x, y, ilp, llp), x, y, ilp, llp)
        with pytest.raises(ng.FeedError, match=match):
            f(np.zeros((4, 5, 2)), np.array(labels), np.array(il), np.array(ll))
        assert np.all(np.isfinite(f(np.zeros((4, 5, 2)), np.array([[1, 2], [2, 9], [3, -1]]), [5, 5], [3, 1])))


def test_no_second_derivative() -> None:
    x = ng.variable([C, T, N], initial_value=0.0)
    loss = ng.sum(ng.ctc_loss(x, np.ones((3, 2), dtype=np.int32), [5, 5], [1, 2]))
    g = ng.deriv(loss, x)
    with pytest.raises(ng.UnsupportedOpError, match="second derivative through ctc"):
        ng.deriv(ng.sum(g * g), x)


def test_arg_codec() -> None:
    op = ng.ctc_loss(*_sources(), blank=2, zero_infinity=True)
    assert op.arg == CTCArg(2, True) and repr(op.arg) == "blank=2 zero_infinity"
    data = json.loads(json.dumps(ARG_TYPES[OpType.CTC].to_json(op, CodecContext())))
    assert ARG_TYPES[OpType.CTC].from_json(data, CodecContext(), "ctc arg") == op.arg
    with pytest.raises(SerializationError, match="where: expected"):
        CTCArg.from_json({"blank": "0", "zero_infinity": False}, CodecContext(), "where")
    with pytest.raises(ng.VerifyError, match="CTCArg"):
        ng.verify(op.replace(arg=3))
