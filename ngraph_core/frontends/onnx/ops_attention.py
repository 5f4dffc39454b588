"""Converters: the attention family (Attention, FlexAttention, LinearAttention, RotaryEmbedding).

Attention (opset 23+) is scaled dot-product attention composed from MatMul and Softmax,
``Y = softmax(softcap(Q K^T * scale) + bias) V`` per head, as ONNX's reference:

* 3-D inputs ``[B, S, hidden]`` are split into heads (``q_num_heads`` / ``kv_num_heads``)
  and merged back; 4-D inputs are ``[B, heads, S, head_size]``;
* ``past_key`` / ``past_value`` are concatenated before the new keys (the ``present_*``
  outputs), grouped-query heads repeat each KV head ``q_heads / kv_heads`` times;
* ``bias`` sums the mask (float: added; bool: 0 where True, -inf where False; shorter than
  the keys: padded with -inf), the causal mask (``is_causal``: -inf above the diagonal
  shifted by the past length, a constant) and ``nonpad_kv_seqlen`` (-inf past each
  batch's length);
* ``scale`` defaults to ``1 / sqrt(head_size)``; it multiplies Q and K by ``sqrt(scale)``
  each, as the reference does, so float16 rounding matches;
* the fourth output is the scores as the matmul gives them (``qk_matmul_output_mode`` 0),
  after softcap (1), with the bias too (2) or after softmax (3), as the spec and onnxruntime
  say (onnx's reference applies softcap for mode 0 too).

Float16 inputs are computed in float32 (ONNX's reference accumulates float16 products in
float32 too) and the outputs cast back.

FlexAttention (``ai.onnx.preview``) is the same product with its ``score_mod`` /
``prob_mod`` subgraphs imported inline; LinearAttention is one ``ng.scan`` over time
carrying the key-value state; RotaryEmbedding rotates feature pairs by cached angles.

Example:
    >>> node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], is_causal=1)
"""

from __future__ import annotations

import math

import numpy as np

from ... import api
from ...ir import Axes, Op
from .errors import OnnxError
from .ops_control import run_graph
from .ops_conv import concat_dim
from .registry import converter
from .tensor import shape_of

_PRECISION = {1: "float32", 10: "float16", 11: "float64"}


def split_heads(ctx, x: Op, heads: int, node) -> Op:
    """``[B, S, heads * D]`` -> ``[B, heads, S, D]``."""
    b, s, hidden = x.axes.lengths
    if heads < 1 or hidden % heads:
        raise OnnxError(f"Attention node {node.name!r}: hidden size {hidden} does not split into {heads} heads; "
                        "hint: set q_num_heads / kv_num_heads for 3-D inputs")
    return ctx.transpose(ctx.reshape(x, [b, s, heads, hidden // heads]), [0, 2, 1, 3])


def repeat_heads(ctx, x: Op, reps: int) -> Op:
    """``[B, H, T, D]`` with each head repeated ``reps`` times in place (``h0 h0 h1 h1 ...``)."""
    if reps == 1:
        return x
    b, h, t, d = x.axes.lengths
    x5 = ctx.reshape(x, [b, h, 1, t, d])
    target = Axes([*x5.axes[:2], *ctx.fresh([reps]), *x5.axes[3:]])
    return ctx.reshape(ctx.expand(x5, target), [b, h * reps, t, d])


def attention_bias(ctx, node, mask, causal: bool, s: int, t: int, past: int, seqlen, batch: int,
                   dtype: str) -> Op | None:
    """The additive bias (0 or -inf, or the float mask), NumPy-broadcastable to ``[B, H, S, T]``."""
    bias = None
    if mask is not None:
        m = ctx.as_op(mask)
        short = t - m.axes.lengths[-1]
        if m.dtype == "bool":
            m = api.where(*ctx.broadcast(m, np.asarray(0, dtype), np.asarray(-np.inf, dtype)))
        m = ctx.as_op(m, dtype)
        if short > 0:  # keys past the mask are masked out
            inside = np.ones(m.axes.lengths[-1] + short, dtype=bool)
            inside[-short:] = False
            padded = api.pad(m, [0] * (len(m.axes) - 1) + [(0, short)])
            m = api.where(*ctx.broadcast(inside, padded, np.asarray(-np.inf, dtype)))
        bias = m
    if causal:
        tri = np.zeros((s, t), dtype=dtype)
        tri[:, past:] = np.where(np.triu(np.ones((s, t - past), dtype=bool), k=1), -np.inf, 0).astype(dtype)
        bias = ctx.as_op(tri) if bias is None else api.add(*ctx.broadcast(bias, tri))
    if seqlen is not None:
        lengths = ctx.reshape(ctx.as_op(seqlen), [batch, 1])
        keep = api.cast(api.less(*ctx.broadcast(np.arange(t, dtype=lengths.dtype).reshape(1, t), lengths)), "bool")
        pad = ctx.reshape(api.where(*ctx.broadcast(keep, np.asarray(0, dtype), np.asarray(-np.inf, dtype))),
                          [batch, 1, 1, t])
        bias = pad if bias is None else api.add(*ctx.broadcast(bias, pad))
    return bias


@converter("Attention", since=23)
def attention(ctx, node, inputs):
    inputs = list(inputs) + [None] * (7 - len(inputs))
    q, k, v = (ctx.as_op(x) for x in inputs[:3])
    mask, past_key, past_value, seqlen = inputs[3:7]
    dtype = q.dtype
    compute = "float32" if dtype == "float16" else dtype
    q, k, v = (ctx.as_op(x, compute) for x in (q, k, v))
    three_d = len(q.axes) == 3
    if three_d:
        q_heads, kv_heads = int(node.attr("q_num_heads", 0)), int(node.attr("kv_num_heads", 0))
        q, k, v = split_heads(ctx, q, q_heads, node), split_heads(ctx, k, kv_heads, node), \
            split_heads(ctx, v, kv_heads, node)
    if len(q.axes) != 4 or len(k.axes) != 4 or len(v.axes) != 4:
        raise OnnxError(f"Attention node {node.name!r}: expected 3-D or 4-D Q, K, V, received shapes "
                        f"{shape_of(q)}, {shape_of(k)}, {shape_of(v)}")
    past = 0
    if past_key is not None:
        past = shape_of(past_key)[2]
        k = concat_dim(ctx, [ctx.as_op(past_key, compute), k], 2)
    if past_value is not None:
        v = concat_dim(ctx, [ctx.as_op(past_value, compute), v], 2)
    present_k, present_v = k, v
    batch, heads, s, head_size = q.axes.lengths
    t = k.axes.lengths[2]
    if heads % k.axes.lengths[1]:
        raise OnnxError(f"Attention node {node.name!r}: {heads} query heads do not group over "
                        f"{k.axes.lengths[1]} key/value heads")
    k, v = repeat_heads(ctx, k, heads // k.axes.lengths[1]), repeat_heads(ctx, v, heads // v.axes.lengths[1])
    scale = float(node.attr("scale", 0.0)) or 1.0 / math.sqrt(head_size)
    root = api.constant(math.sqrt(scale), dtype=compute)
    scores = ctx.matmul(q * root, ctx.transpose(k * root, [0, 1, 3, 2]))
    mode = int(node.attr("qk_matmul_output_mode", 0))
    qk_out = scores
    softcap = float(node.attr("softcap", 0.0))
    if softcap > 0:
        cap = api.constant(softcap, dtype=compute)
        scores = api.tanh(scores / cap) * cap
    if mode == 1:
        qk_out = scores
    bias = attention_bias(ctx, node, mask, bool(node.attr("is_causal", 0)), s, t, past, seqlen, batch, compute)
    if bias is not None:
        scores = api.add(*ctx.broadcast(scores, bias))
    if mode == 2:
        qk_out = scores
    precision = _PRECISION.get(int(node.attr("softmax_precision", 0)), compute)
    logits = api.cast(scores, precision) if precision != compute else scores
    probs = api.axes_with_order(api.softmax(logits, normalization_axes=[logits.axes[3]]), logits.axes)
    probs = api.cast(probs, compute) if precision != compute else probs
    if mode == 3:
        qk_out = probs
    y = ctx.matmul(probs, v)
    if three_d:
        y = ctx.reshape(ctx.transpose(y, [0, 2, 1, 3]), [batch, s, heads * y.axes.lengths[3]])
    outputs = [y, present_k, present_v, qk_out][:max(1, len(node.outputs))]
    return [ctx.as_op(o, dtype) for o in outputs]


@converter("RotaryEmbedding", since=23)
def rotary_embedding(ctx, node, inputs):
    """Rotate pairs of each head's first ``rotary_embedding_dim`` features by position-dependent angles.

    ``X`` is ``[B, H, S, D]`` or ``[B, S, H * D]``; the pairs are the two halves of the rotated
    features, or (``interleaved``) the even and odd ones; ``cos_cache`` / ``sin_cache`` are
    ``[B, S, r / 2]``, or ``[max_position, r / 2]`` rows picked by ``position_ids`` ``[B, S]``.
    """
    inputs = list(inputs) + [None] * (4 - len(inputs))
    x = ctx.as_op(inputs[0])
    cos, sin = ctx.as_op(inputs[1], x.dtype), ctx.as_op(inputs[2], x.dtype)
    if len(x.axes) == 4:
        seq = ctx.transpose(x, [0, 2, 1, 3])  # [B, S, H, D]
    elif len(x.axes) == 3:
        seq = ctx.reshape(x, [*x.axes.lengths[:2], int(node.attr("num_heads", 0)),
                              x.axes.lengths[2] // max(1, int(node.attr("num_heads", 0)))])
    else:
        raise OnnxError(f"RotaryEmbedding node {node.name!r}: expected X of rank 3 or 4, received "
                        f"{tuple(x.axes.lengths)}")
    b, s, _, d = seq.axes.lengths
    rot = int(node.attr("rotary_embedding_dim", 0)) or d
    if inputs[3] is not None:  # rows of the caches by position: [B, S, r/2]
        ids = ctx.as_op(inputs[3])
        cos, sin = (ctx.reshape(api.axes_with_order(g, Axes([*g.axes[1:], g.axes[0]])), [b, s, rot // 2])
                    for g in (api.gather(t, ids, t.axes[0]) for t in (cos, sin)))
    if shape_of(cos)[-1] != rot // 2:
        raise OnnxError(f"RotaryEmbedding node {node.name!r}: cos_cache's last dim {shape_of(cos)[-1]} is not "
                        f"rotary_embedding_dim / 2 = {rot // 2}")
    cos, sin = (ctx.reshape(t, [b, s, 1, rot // 2]) for t in (cos, sin))
    every = [slice(None)] * 3
    interleaved = bool(node.attr("interleaved", 0))
    halves = [slice(0, rot, 2), slice(1, rot, 2)] if interleaved else [slice(0, rot // 2), slice(rot // 2, rot)]
    x1, x2 = (ctx.rename(api.tensor_slice(seq, every + [h])) for h in halves)
    x1, x2, cos, sin = ctx.broadcast(x1, x2, cos, sin)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:  # real, imag, real, imag ...
        pairs = concat_dim(ctx, [ctx.reshape(t, [*t.axes.lengths, 1]) for t in (real, imag)], 4)
        rotated = ctx.reshape(pairs, [b, s, seq.axes.lengths[2], rot])
    else:
        rotated = concat_dim(ctx, [real, imag], 3)
    if rot < d:
        rotated = concat_dim(ctx, [rotated, ctx.rename(api.tensor_slice(seq, every + [slice(rot, d)]))], 3)
    if len(x.axes) == 3:
        return ctx.reshape(rotated, x.axes.lengths)
    return ctx.transpose(rotated, [0, 2, 1, 3])


LINEAR_RULES = ("linear", "gated", "delta", "gated_delta")


def _heads_first(ctx, x: Op, heads: int, axes: Axes) -> Op:
    """``[B, T, heads * D]`` -> ``[B, heads, T, D]`` named ``axes``."""
    b, t, hidden = x.axes.lengths
    return ctx.rename(ctx.transpose(ctx.reshape(x, [b, t, heads, hidden // heads]), [0, 2, 1, 3]), axes)


@converter("LinearAttention", since=27)
def linear_attention(ctx, node, inputs):
    """Causal linear attention as one ``ng.scan`` over time, carrying the ``[B, H_kv, d_k, d_v]`` state.

    Per step: ``S *= exp(decay_t)`` (gated rules), ``v_t <- beta_t * (v_t - S^T k_t)`` (delta
    rules), ``S += k_t v_t^T``, ``o_t = scale * q_t S`` (query heads grouped over the KV heads).
    """
    inputs = list(inputs) + [None] * (6 - len(inputs))
    rule = node.attr("update_rule", "gated_delta")
    q_heads, kv_heads = int(node.attr("q_num_heads", 0)), int(node.attr("kv_num_heads", 0))
    who = f"LinearAttention node {node.name!r}"
    if rule not in LINEAR_RULES:
        raise OnnxError(f"{who}: expected update_rule in {LINEAR_RULES}, received {rule!r}")
    if q_heads < 1 or kv_heads < 1 or q_heads % kv_heads:
        raise OnnxError(f"{who}: q_num_heads={q_heads} must be a positive multiple of kv_num_heads={kv_heads}")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (inputs[4] is not None) or delta != (inputs[5] is not None):
        raise OnnxError(f"{who}: update_rule {rule!r} takes decay: {gated}, beta: {delta}; received decay: "
                        f"{inputs[4] is not None}, beta: {inputs[5] is not None}")
    query = ctx.as_op(inputs[0])
    out_dtype = query.dtype
    q, k, v = (ctx.as_op(x, "float32") for x in inputs[:3])
    b, t, _ = q.axes.lengths
    dk, dv, group = q.axes.lengths[2] // q_heads, v.axes.lengths[2] // kv_heads, q_heads // kv_heads
    B, H, G, T, DK, DV = ctx.fresh([b, kv_heads, group, t, dk, dv])
    q = ctx.rename(ctx.transpose(ctx.reshape(q, [b, t, kv_heads, group, dk]), [0, 2, 3, 1, 4]), Axes([B, H, G, T, DK]))
    k, v = _heads_first(ctx, k, kv_heads, Axes([B, H, T, DK])), _heads_first(ctx, v, kv_heads, Axes([B, H, T, DV]))
    sequences = [q, k, v]
    if gated:
        decay = ctx.as_op(inputs[4], "float32")
        per_key = decay.axes.lengths[2] == kv_heads * dk
        decay = _heads_first(ctx, decay, kv_heads, Axes([B, H, T, DK])) if per_key else \
            ctx.rename(ctx.transpose(ctx.reshape(decay, [b, t, kv_heads]), [0, 2, 1]), Axes([B, H, T]))
        sequences.append(decay)
    if delta:
        beta = ctx.as_op(inputs[5], "float32")
        beta = ctx.rename(ctx.transpose(beta, [0, 2, 1]), Axes([B, H, T])) if beta.axes.lengths[2] == kv_heads \
            else ctx.rename(ctx.reshape(beta, [b, t]), Axes([B, T]))
        sequences.append(beta)
    state_axes = Axes([B, H, DK, DV])
    past = inputs[3]
    state = ctx.rename(ctx.as_op(past, "float32"), state_axes) if past is not None else \
        api.constant(np.zeros(state_axes.lengths, "float32"), axes=state_axes)
    scale = float(node.attr("scale", 0.0)) or 1.0 / math.sqrt(dk)
    read_axes = Axes([B, H, G, DK, DV])

    def step(*args):
        q_t, k_t, v_t, *rest = args[:-1]
        s = args[-1]
        if gated:
            s = s * api.exp(rest.pop(0))
        if delta:
            retrieved = api.sum(s * api.broadcast(k_t, s.axes), reduction_axes=[DK])
            v_t = (v_t - retrieved) * rest.pop(0)
        s = s + api.broadcast(k_t, s.axes) * api.broadcast(v_t, s.axes)
        out = api.sum(api.broadcast(q_t, read_axes) * api.broadcast(s, read_axes), reduction_axes=[DK])
        return [out * api.constant(scale, dtype="float32")], [s]

    (final,), (outs,) = api.scan(step, sequences, [state], T, name=f"{node.name}_scan")
    y = api.axes_with_order(outs, Axes([B, T, H, G, DV]))
    y = api.cast(ctx.reshape(y, [b, t, q_heads * dv]), out_dtype)
    state_dtype = ctx.as_op(past).dtype if past is not None else out_dtype
    return [y, api.cast(ctx.rename(final), state_dtype)]


@converter("FlexAttention", since=1, domain="ai.onnx.preview")
def flex_attention(ctx, node, inputs):
    """``softmax(score_mod(Q K^T * scale))`` (then ``prob_mod``) times ``V``; the modifiers are subgraphs
    imported inline on the ``[B, Hq, L, S]`` scores, so any ops they use run in the one graph."""
    q, k, v = (ctx.as_op(x) for x in inputs[:3])
    if len(q.axes) != 4 or len(k.axes) != 4 or len(v.axes) != 4:
        raise OnnxError(f"FlexAttention node {node.name!r}: expected rank-4 Q, K, V, received {shape_of(q)}, "
                        f"{shape_of(k)}, {shape_of(v)}")
    heads, kv_heads = q.axes.lengths[1], k.axes.lengths[1]
    if heads % kv_heads:
        raise OnnxError(f"FlexAttention node {node.name!r}: {heads} query heads do not group over {kv_heads}")
    precision = _PRECISION.get(int(node.attr("softmax_precision", 0)),
                               "float64" if q.dtype == "float64" else "float32")
    k, v = repeat_heads(ctx, k, heads // kv_heads), repeat_heads(ctx, v, heads // kv_heads)
    scale = float(node.attr("scale", 0.0)) or 1.0 / math.sqrt(q.axes.lengths[3])
    root = api.constant(math.sqrt(scale), dtype=q.dtype)
    scores = api.cast(ctx.matmul(q * root, ctx.transpose(k * root, [0, 1, 3, 2])), precision)
    who = f"FlexAttention node {node.name!r}"
    if node.attr("score_mod", None) is not None:
        scores = ctx.as_op(run_graph(ctx, node.attrs["score_mod"], [scores], f"{who} score_mod")[0], precision)
    probs = api.axes_with_order(api.softmax(scores, normalization_axes=[scores.axes[3]]), scores.axes)
    if node.attr("prob_mod", None) is not None:
        probs = ctx.as_op(run_graph(ctx, node.attrs["prob_mod"], [probs], f"{who} prob_mod")[0], precision)
    return api.cast(ctx.matmul(probs, ctx.as_op(v, precision)), v.dtype)
