"""Converters: signal processing (DFT, STFT, the Hann / Hamming / Blackman windows, MelWeightMatrix).

ONNX carries complex tensors as a trailing dim of 2 (real, imaginary) or 1 (real only).
A DFT of length ``N`` along one dim is linear, so it becomes ``dot`` products of the real
and imaginary parts with static cosine and sine matrices (``[input length, output
length]``, built at import time; truncation and zero padding to ``N`` are rows left out).
The inverse of a one-sided spectrum (``irfft``) weights each bin by its Hermitian twin.
``STFT`` gathers the frames (static positions), applies the window and reuses the DFT.
Windows and mel matrices depend only on static sizes: they are import-time constants.

Example:
    >>> # DFT(x [B, 8, 1], onesided=1) -> [B, 5, 2]: the 5 unique bins of a real signal
"""

from __future__ import annotations

import numpy as np

from ... import api
from .errors import OnnxError
from .ops_axis import static_int
from .ops_index import take
from .ops_shape import optional
from .registry import converter
from .tensor import normalize_axis, shape_of


def dft_matrices(n_in: int, n_out: int, length: int, inverse: bool, onesided: bool) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) matrices ``[n_in, n_out]`` of a length-``length`` DFT (entries past ``length`` are zero rows).

    Forward: ``Re = a cos + b sin``, ``Im = b cos - a sin``. Inverse: ``Re = a cos - b sin``,
    ``Im = b cos + a sin``, already divided by ``length`` (and, one-sided, weighted by 2 for
    the bins that stand for a conjugate pair).
    """
    used = min(n_in, length if not (inverse and onesided) else length // 2 + 1)
    t = np.arange(used)[:, None]
    k = np.arange(n_out)[None, :]
    angle = 2 * np.pi * ((t * k) % length) / length
    cos, sin = np.zeros((n_in, n_out)), np.zeros((n_in, n_out))
    cos[:used], sin[:used] = np.cos(angle), np.sin(angle)
    cos[np.abs(cos) < 1e-12], sin[np.abs(sin) < 1e-12] = 0.0, 0.0  # exact zeros where the angle is a multiple of pi/2
    if inverse:
        scale = np.full((n_in, 1), 1.0 / length)
        if onesided:
            scale[1:] *= 2
            if length % 2 == 0 and length // 2 < n_in:
                scale[length // 2] /= 2
            sin[0] = 0.0  # the DC bin's (and Nyquist's) imaginary part is ignored, as numpy's irfft does
            if length % 2 == 0 and length // 2 < n_in:
                sin[length // 2] = 0.0
        cos, sin = cos * scale, sin * scale
    return cos, sin


def dft(ctx, x, axis: int, length: int, inverse: bool, onesided: bool):
    """The DFT of ``x [..., 1 | 2]`` along ``axis`` as ``[..., 2]`` (an inverse one-sided one: ``[..., 1]``)."""
    dims = shape_of(x)
    n_in = dims[axis]
    real_out = inverse and onesided
    n_out = length if inverse or not onesided else length // 2 + 1
    ctx.check_constant((3 * n_in, n_out), "float64")  # cos, sin and the angles, before they are made
    cos, sin = dft_matrices(n_in, n_out, length, inverse, onesided)
    # float64 throughout: terms that cancel exactly (a real signal's imaginary parts) must cancel to ~0
    parts = [api.cast(api.tensor_slice(x, [slice(None)] * (len(dims) - 1) + [i]), "float64") for i in range(dims[-1])]
    a, b = parts[0], parts[1] if len(parts) > 1 else None
    out_axis = ctx.fresh([n_out])[0]
    order = list(a.axes[:axis]) + [out_axis] + list(a.axes[axis + 1:])

    def apply(v, matrix):
        w = api.constant(matrix, axes=[v.axes[axis], out_axis], dtype="float64")
        return api.axes_with_order(api.dot(v, w), order)

    sign = 1 if inverse else -1
    real = apply(a, cos) if b is None else apply(a, cos) - sign * apply(b, sin)
    if real_out:
        return ctx.reshape(api.cast(real, x.dtype), shape_of(real) + (1,))
    imag = sign * apply(a, sin) if b is None else apply(b, cos) + sign * apply(a, sin)
    pair = ctx.fresh([1])[0]
    parts = [api.expand_dims(v, pair, len(order)) for v in (real, imag)]
    return ctx.rename(api.cast(api.concat_along_axis(parts, pair.name), x.dtype))


@converter("DFT", since=17)
def dft_op(ctx, node, inputs):
    """The discrete Fourier transform (``inverse``, ``onesided``) of length ``dft_length`` along ``axis``.

    ``axis`` is an attribute (default 1) before opset 20 and a static input (default -2) from it on.
    """
    x = ctx.as_op(inputs[0])
    dims, who = shape_of(x), f"DFT node {node.name!r}"
    if dims[-1] not in (1, 2):
        raise OnnxError(f"{who}: expected a last dim of 1 (real) or 2 (complex), received shape {dims}")
    axis = node.attr("axis", 1) if node.opset < 20 else static_int(ctx, node, optional(inputs, 2), "DFT's axis", -2)
    axis = normalize_axis(axis, len(dims), who)
    if axis == len(dims) - 1:
        raise OnnxError(f"{who}: axis {axis} is the (real, imaginary) dim; hint: transform a signal dim")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    default = 2 * (dims[axis] - 1) if inverse and onesided else dims[axis]
    length = static_int(ctx, node, optional(inputs, 1), "DFT's dft_length", default)
    if length < 1:
        raise OnnxError(f"{who}: dft_length must be >= 1, received {length}")
    return dft(ctx, x, axis, length, inverse, onesided)


@converter("STFT", since=17)
def stft(ctx, node, inputs):
    """The short-time Fourier transform ``[batch, frames, bins, 2]`` of ``signal [batch, length, 1 | 2]``."""
    x = ctx.as_op(inputs[0])
    dims, who = shape_of(x), f"STFT node {node.name!r}"
    step = static_int(ctx, node, inputs[1], "STFT's frame_step")
    window = optional(inputs, 2)
    frame = static_int(ctx, node, optional(inputs, 3), "STFT's frame_length",
                       shape_of(window)[0] if window is not None else dims[1])
    if len(dims) != 3 or step < 1 or not 1 <= frame <= dims[1]:
        raise OnnxError(f"{who}: signal {dims}, frame_step {step}, frame_length {frame}; hint: expected a signal "
                        "[batch, length, 1 | 2], a positive step and a frame no longer than the signal")
    frames = 1 + (dims[1] - frame) // step
    ctx.check_constant((frames, frame), "int64")
    positions = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    framed = take(ctx, x, positions.astype("int64"), 1)  # [batch, frames, frame, 1 | 2]
    if window is not None:
        w = ctx.reshape(ctx.as_op(window, dtype=x.dtype), (1, 1, frame, 1))
        framed, w = ctx.broadcast(framed, w)
        framed = framed * w
    return dft(ctx, framed, 2, frame, inverse=False, onesided=bool(node.attr("onesided", 1)))


def _window_terms(node) -> tuple[float, ...]:
    return {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
            "BlackmanWindow": (0.42, 0.5, 0.08)}[node.op_type]


@converter("HannWindow", "HammingWindow", "BlackmanWindow", since=17)
def window(ctx, node, inputs):
    """The window ``a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)`` of the static ``size`` (N: size, or size - 1
    when ``periodic=0``), in ``output_datatype`` (default float32)."""
    size = static_int(ctx, node, inputs[0], f"{node.op_type}'s size")
    ctx.check_constant((2, size), "float64")  # the positions and the values
    span = size if node.attr("periodic", 1) else size - 1
    a0, a1, a2 = _window_terms(node)
    n = np.arange(size, dtype=np.float64)
    values = a0 - a1 * np.cos(2 * np.pi * n / span) + a2 * np.cos(4 * np.pi * n / span)
    return values.astype(ctx.dtype(node.attr("output_datatype", 1), f"{node.op_type} node {node.name!r}"))


@converter("MelWeightMatrix", since=17)
def mel_weight_matrix(ctx, node, inputs):
    """The ``[dft_length // 2 + 1, num_mel_bins]`` triangular mel filter bank, as the ONNX reference builds it."""
    bins, length = (static_int(ctx, node, inputs[i], f"MelWeightMatrix's {w}") for i, w in
                    enumerate(("num_mel_bins", "dft_length")))
    rate = float(np.asarray(ctx.static(inputs[2], "MelWeightMatrix's sample_rate")).reshape(-1)[0])
    low, high = (float(np.asarray(ctx.static(inputs[i], f"MelWeightMatrix's {w}")).reshape(-1)[0])
                 for i, w in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")))
    if bins < 0 or length < 0:
        raise OnnxError(f"MelWeightMatrix node {node.name!r}: expected non-negative num_mel_bins and dft_length, "
                        f"received {bins} and {length}")
    ctx.check_constant((length // 2 + 2, bins + 2), "float64")  # the filter bank and the mel points
    low_mel, high_mel = (2595 * np.log10(1 + f / 700) for f in (low, high))
    mel = np.arange(bins + 2) * ((high_mel - low_mel) / (bins + 2)) + low_mel
    edges = (((length + 1) * (700 * (np.power(10, mel / 2595) - 1))) // rate).astype(int)
    out = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        left, centre, right = edges[i:i + 3]
        if centre == left:
            out[centre, i] = 1
        else:
            out[left:centre + 1, i] = (np.arange(left, centre + 1) - left) / (centre - left)
        if right > centre:
            out[centre:right, i] = (right - np.arange(centre, right)) / (right - centre)
    return out.astype(ctx.dtype(node.attr("output_datatype", 1), f"MelWeightMatrix node {node.name!r}"))

