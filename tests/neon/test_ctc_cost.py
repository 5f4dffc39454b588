"""The neon ``CTC`` cost: packed targets, value and gradient against PyTorch, and a tiny model that learns."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.costs import CTC, CostError, pack_ctc_targets
from neon.decoders import greedy_decode
from neon.optimizers import GradientDescentMomentum

C, T, N = ng.make_axis(5, "C"), ng.make_axis(8, "REC"), ng.make_axis(3, "N")
LABELS = [[1, 1, 2], [3], []]
FRAMES = [8, 6, 4]


def test_pack_ctc_targets() -> None:
    packed = pack_ctc_targets(LABELS, FRAMES, max_label_length=4)
    np.testing.assert_array_equal(packed, [[8, 3, 1, 1, 2, 0], [6, 1, 3, 0, 0, 0], [4, 0, 0, 0, 0, 0]])
    assert packed.dtype == np.int32 and pack_ctc_targets(LABELS, FRAMES).shape == (3, 5)
    with pytest.raises(CostError, match="at most 2"):
        pack_ctc_targets(LABELS, FRAMES, max_label_length=2)
    with pytest.raises(CostError, match="one input length per label sequence"):
        pack_ctc_targets(LABELS, [8])


def run(cost: CTC, logits: np.ndarray, packed: np.ndarray, probs: bool = False) -> tuple[float, np.ndarray]:
    """The cost and its gradient w.r.t. the logits (float64), targets fed as float32 like ArrayIterator's."""
    x = ng.variable([C, T, N], initial_value=logits, dtype="float64")
    y = cost.target_placeholder(x, packed.shape[1:], N.length)
    y_hat = ng.softmax(x, normalization_axes=[C]) if probs else x
    value = cost(y_hat, y)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        v, g = t.computation([value, ng.deriv(value, x)], y)(packed.T.astype(np.float32))
    return float(v), g


def test_value_and_gradient_match_torch() -> None:
    torch = pytest.importorskip("torch")
    logits = np.random.default_rng(0).normal(size=(5, 8, 3))
    packed = pack_ctc_targets(LABELS, FRAMES)
    value, grad = run(CTC(blank=0), logits, packed)
    xt = torch.tensor(logits.transpose(1, 2, 0), requires_grad=True)
    loss = torch.nn.functional.ctc_loss(xt.log_softmax(2), torch.tensor(packed[:, 2:], dtype=torch.long),
                                        torch.tensor(FRAMES), torch.tensor([3, 1, 0]), reduction="sum") / 3
    (gt,) = torch.autograd.grad(loss, xt)
    assert value == pytest.approx(loss.item(), rel=1e-12)
    np.testing.assert_allclose(grad, gt.numpy().transpose(2, 0, 1), atol=1e-12)
    value_p, grad_p = run(CTC(blank=0, inputs="probs"), logits, packed, probs=True)  # a softmax output
    assert value_p == pytest.approx(value, rel=1e-9)
    np.testing.assert_allclose(grad_p, grad, atol=1e-9)


def test_blank_and_zero_infinity() -> None:
    logits = np.random.default_rng(1).normal(size=(5, 8, 3))
    impossible = pack_ctc_targets([[1, 1, 1, 1, 1], [2], [3]], [8, 8, 8])  # needs 9 frames
    assert run(CTC(), logits, impossible)[0] == np.inf
    value, grad = run(CTC(zero_infinity=True), logits, impossible)
    assert np.isfinite(value) and np.all(grad[:, :, 0] == 0)
    shifted = pack_ctc_targets([[0, 0, 1], [2], []], FRAMES)  # class 0 is a label when the blank is 4
    assert np.isfinite(run(CTC(blank=4), logits, shifted)[0])


@pytest.mark.parametrize("kw, match", [
    ({"blank": -1}, "blank to be an int"), ({"inputs": "softmax"}, "inputs='logits' or 'probs'"),
    ({"zero_infinity": 1}, "zero_infinity to be a bool"),
])
def test_bad_settings(kw: dict, match: str) -> None:
    with pytest.raises(CostError, match=match):
        CTC(**kw)


def test_bad_targets() -> None:
    x = ng.placeholder([C, T, N])
    with pytest.raises(CostError, match=r"packed targets \[2 \+ L, N\]"):
        CTC()(x, ng.placeholder([N]))
    with pytest.raises(CostError, match=r"shape \(2 \+ L,\)"):
        CTC().target_placeholder(x, (3, 2), 3)
    assert CTC.from_config(CTC(2, "probs", True).get_config()).get_config() == \
        {"blank": 2, "inputs": "probs", "zero_infinity": True}


def test_a_tiny_model_learns_its_labels() -> None:
    """Per-frame features -> logits by one dot product, trained with the cost: greedy decoding gets the labels."""
    F = ng.make_axis(6, "F")
    rng = np.random.default_rng(2)
    features = rng.normal(size=(6, 8, 3))
    x = ng.constant(features, [F, T, N])
    w = ng.variable([C, F], initial_value=0.0, labels=["trainable"])
    logits = ng.dot(w, x)
    packed = pack_ctc_targets([[1, 2], [3, 3], [4]], [8, 7, 5])
    y = ng.constant(packed.T.copy(), [ng.make_axis(4, "P"), N], dtype="int32")
    cost = CTC()(logits, y)
    step = GradientDescentMomentum(0.3, momentum_coef=0.9)(cost, [w])
    with ng.transformers.make_transformer() as t:
        train = t.computation([cost, step])
        losses = [float(train()[0]) for _ in range(150)]
        scores = t.computation(logits)()
    assert losses[-1] < 0.2 * losses[0]
    assert greedy_decode(scores, [8, 7, 5], blank=0, scores_kind="logits") == [[1, 2], [3, 3], [4]]
