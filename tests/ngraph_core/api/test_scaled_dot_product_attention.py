"""``ng.scaled_dot_product_attention`` against PyTorch's ``F.scaled_dot_product_attention`` in float64.

Values and the gradients of a fixed linear loss to q, k and v, with causal and key-padding masks
(ragged lengths), one and several heads, self and cross (another key length), and the errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng

torch = pytest.importorskip("torch")

D, DV, H, T, S, N = 4, 3, 2, 5, 6, 3
TOL = 1e-10


def _axes(*pairs: tuple[str, int]) -> list[ng.Axis]:
    return [ng.make_axis(n, name) for name, n in pairs]


def run_both(tq: int, tk: int, causal: bool = False, lengths: list[int] | None = None,
             scale: float | None = None) -> None:
    """Our attention on [D, H, REC, N] operands vs torch's on (N, H, REC, D), values and gradients."""
    rng = np.random.default_rng(tq * 10 + tk)
    qa = _axes(("D", D), ("H", H), ("REC", tq), ("N", N))
    ka = _axes(("D", D), ("H", H), ("REC", tk), ("N", N))
    va = _axes(("DV", DV), ("H", H), ("REC", tk), ("N", N))
    qv, kv, vv = (rng.standard_normal([a.length for a in axes]) for axes in (qa, ka, va))
    q, k, v = (ng.placeholder(axes, dtype="float64") for axes in (qa, ka, va))
    feeds = [q, k, v]
    key_lengths = None
    if lengths is not None:
        key_lengths = ng.placeholder([qa[3]], dtype="int32")
        feeds.append(key_lengths)
    out = ng.scaled_dot_product_attention(q, k, v, causal=causal, key_lengths=key_lengths, scale=scale)
    assert out.axes.names == ("DV", "H", "REC", "N") and out.axes.lengths == (DV, H, tq, N)
    r = rng.standard_normal(out.axes.lengths)
    loss = ng.sum(out * ng.constant(r, out.axes, dtype="float64"))
    grads = ng.gradients(loss, [q, k, v])
    values = [qv, kv, vv] + ([np.array(lengths, dtype=np.int32)] if lengths is not None else [])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got = t.computation([out, *grads], *feeds)(*values)

    def nhtd(x: np.ndarray) -> torch.Tensor:  # [D, H, T, N] -> (N, H, T, D)
        return torch.tensor(x.transpose(3, 1, 2, 0), requires_grad=True)

    tq_, tk_, tv_ = nhtd(qv), nhtd(kv), nhtd(vv)
    mask = torch.ones((N, 1, tq, tk), dtype=torch.bool)
    if causal:
        mask &= torch.ones((tq, tk), dtype=torch.bool).tril()
    if lengths is not None:
        mask &= (torch.arange(tk)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]
    ref = torch.nn.functional.scaled_dot_product_attention(tq_, tk_, tv_, attn_mask=mask, scale=scale)
    (ref * torch.tensor(r.transpose(3, 1, 2, 0))).sum().backward()
    expected = [ref.detach().numpy(), tq_.grad.numpy(), tk_.grad.numpy(), tv_.grad.numpy()]
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, expected):
        np.testing.assert_allclose(a, b.transpose(3, 1, 2, 0), atol=TOL, rtol=TOL, err_msg=name)


def test_self_attention() -> None:
    run_both(T, T)


def test_cross_attention_other_key_length_and_scale() -> None:
    run_both(T, S, scale=0.3)


def test_causal() -> None:
    run_both(T, T, causal=True)


def test_key_padding_from_ragged_lengths() -> None:
    run_both(T, S, lengths=[6, 2, 4])


def test_causal_and_key_padding() -> None:
    run_both(T, T, causal=True, lengths=[5, 1, 3])


def test_a_query_that_sees_no_key_gives_zeros() -> None:
    D_, R, N_ = ng.make_axis(2, "D"), ng.make_axis(3, "REC"), ng.make_axis(2, "N")
    q = ng.placeholder([D_, R, N_], dtype="float64")
    lengths = ng.placeholder([N_], dtype="int32")
    out = ng.scaled_dot_product_attention(q, q, q, key_lengths=lengths)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got = t.computation(out, q, lengths)(np.ones((2, 3, 2)), np.array([0, 3], dtype=np.int32))
    assert np.all(got[:, :, 0] == 0) and np.allclose(got[:, :, 1], 1.0)


def test_dropout_keeps_the_expectation_and_drops_weights() -> None:
    D_, R, N_ = ng.make_axis(1, "D"), ng.make_axis(4, "REC"), ng.make_axis(64, "N")
    q = ng.placeholder([D_, R, N_], dtype="float64")
    v = ng.placeholder([D_, R, N_], dtype="float64")
    out = ng.scaled_dot_product_attention(q, q * 0.0, v, dropout=0.5, seed=3)  # uniform weights 1/4
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got = t.computation(out, q, v)(np.zeros((1, 4, 64)), np.ones((1, 4, 64)))
    # each output is (kept weights) * 0.25 / 0.5: a multiple of 0.5, some of them differing
    assert np.allclose(got * 2, np.round(got * 2)) and len(np.unique(got)) > 1
    assert abs(got.mean() - 1.0) < 0.15


def test_errors_name_the_axes() -> None:
    D_, R, N_ = ng.make_axis(2, "D"), ng.make_axis(3, "REC"), ng.make_axis(2, "N")
    q = ng.placeholder([D_, R, N_])
    with pytest.raises(ng.AxesError, match="time axis named 'REC'"):
        ng.scaled_dot_product_attention(q, ng.placeholder([D_, N_]), q)
    with pytest.raises(ng.AxesError, match="keys with axes"):
        ng.scaled_dot_product_attention(q, ng.placeholder([D_, ng.make_axis(2, "H"), R, N_]), q)
    with pytest.raises(ng.AxesError, match="key_lengths with axes"):
        ng.scaled_dot_product_attention(q, q, q, key_lengths=ng.placeholder([R], dtype="int32"))
    with pytest.raises(ng.DTypeError, match="integer key_lengths"):
        ng.scaled_dot_product_attention(q, q, q, key_lengths=ng.placeholder([N_]))
    with pytest.raises(ValueError, match="dropout in"):
        ng.scaled_dot_product_attention(q, q, q, dropout=1.0)
