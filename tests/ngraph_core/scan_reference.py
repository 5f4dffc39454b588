"""Reference loops for ``ng.scan``: a tanh RNN in NumPy (with lengths and reverse) and in PyTorch.

The RNN is ``h_t = tanh(W x_t + U h_{t-1})`` over ``x: [F, REC, N]``, ``h: [H, N]``, with the
step output ``y_t = h_t``; with valid lengths, steps past an example's end leave its state
unchanged and write zeros, and a reverse scan starts each example at its own last step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ngraph_core as ng


def np_rnn(x: np.ndarray, h0: np.ndarray, w: np.ndarray, u: np.ndarray, lengths: np.ndarray | None = None,
           reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(h_final [H, N], ys [H, REC, N])`` of the tanh RNN, looping in NumPy."""
    steps, batch = x.shape[1], x.shape[2]
    lengths = np.full(batch, steps) if lengths is None else np.asarray(lengths)
    h = h0.copy()
    ys = np.zeros((h0.shape[0], steps, batch))
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        new = np.tanh(w @ x[:, t] + u @ h)
        valid = t < lengths
        h = np.where(valid[None, :], new, h)
        ys[:, t] = np.where(valid[None, :], new, 0.0)
    return h, ys


def ng_rnn(x: ng.Op, h0: ng.Op, w: ng.Op, u: ng.Op, axis: ng.Axis, lengths: ng.Op | None = None,
           reverse: bool = False) -> tuple[ng.Op, ng.Op]:
    """The same RNN with ``ng.scan``; ``w: [H, F]`` and ``u: [H, H2]`` (H2 is H renamed) read inside the step."""
    hidden = h0.axes[0]
    h2 = ng.make_axis(hidden.length, "H2")

    def step(x_t: ng.Op, h: ng.Op) -> tuple[list[ng.Op], list[ng.Op]]:
        new = ng.tanh(ng.dot(w, x_t) + ng.dot(u, ng.cast_axes(h, [h2, h.axes[1]])))
        new = ng.axes_with_order(new, h.axes)
        return [new], [new]

    (final,), (ys,) = ng.scan(step, [x], [h0], axis, reverse=reverse, lengths=lengths)
    return final, ys


def np_leaky(x: np.ndarray, h0: np.ndarray) -> np.ndarray:
    """``h_t = tanh(x_t + 0.5 h_{t-1})`` over ``x: [C, REC, N]``: the stacked states plus the last one."""
    h, hs = h0.copy(), np.zeros_like(x)
    for t in range(x.shape[1]):
        h = np.tanh(x[:, t] + 0.5 * h)
        hs[:, t] = h
    return hs + h[:, None, :]


def ng_leaky(x: ng.Op, h0: ng.Op) -> ng.Op:
    """``np_leaky`` with ``ng.scan`` (the op-table case: one op, gradients to both inputs)."""
    rec = x.axes.recurrent_axis
    (last,), (hs,) = ng.scan(lambda x_t, h: ([ng.tanh(x_t + h * 0.5)], [ng.tanh(x_t + h * 0.5)]), [x], [h0], rec)
    return hs + last


def torch_leaky(x: Any, h0: Any) -> Any:
    """``np_leaky`` in PyTorch (values and gradients through autograd)."""
    import torch

    h, hs = h0, []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] + 0.5 * h)
        hs.append(h)
    return torch.stack(hs, 1) + h[:, None, :]
