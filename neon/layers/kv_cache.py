"""Key/value caching for a causal Transformer stack: a new token costs one step, not a re-run of the prefix.

A decoder-only language model (``TransformerEncoder(..., causal=True)`` under a token embedding and
a position embedding) predicts token ``p + 1`` from tokens ``0..p``. Re-running the whole window
for every new token recomputes the keys and values of every earlier token, which causal attention
never changes: token ``j``'s key and value depend on tokens ``<= j`` only. So each attention layer
keeps them in a **cache**, and one step computes the new token's row alone.

**The design: caches are graph inputs and outputs.** Both functions below build ordinary,
functional graphs, so each compiles once into an ordinary computation (or an
``ng.inference.CompiledModel``) and nothing in the graph holds state; a driver
(``ng.inference.Generator``) feeds each step's output caches to the next step.

* ``prefill(encoder, x)``: the stack over a window ``x [F, REC:T, N]``, exactly as ``encoder(x)``
  computes it (causal), plus each layer's keys ``[D, H, REC:T, N]`` and values ``[V, H, REC:T, N]``.
  A prompt shorter than the window is zero-padded after its end: causal attention keeps the padding
  from reaching the prompt's steps, and the padding's cache rows are hidden from every later step
  (below) until a step overwrites them.
* ``decode_step(encoder, x, caches, position)``: the stack over one new token ``x [F, REC:1, N]``
  at step ``position`` (int ``[N]``). Each layer writes the token's key and value into row
  ``position`` of its caches (``where(one_hot(position), new, cache)``: exact, and ``O(T d)`` per
  layer, small beside the ``O(d^2)`` projections), then attends over the written caches with
  ``key_lengths = position + 1``: steps ``<= position`` are seen, later rows (stale or padding) are not.
  Returns the output ``[F, REC:1, N]`` and the written caches.

The step computes the same sums as the window: its logits equal the window's at every position to
float rounding (``tests/neon/layers/test_kv_cache.py``: 1e-5 in float32, 1e-10 in float64).
``position_step`` adds a position embedding's row ``position`` to a one-step input.

Example:
    >>> h, caches = prefill(encoder, position_layer(embed(window)))        # window [REC:T, N]
    >>> caches = cache_placeholders(encoder, T, N)                          # the step's inputs
    >>> y, written = decode_step(encoder, position_step(position_layer, embed(token), p), caches, p)
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import ngraph_core as ng

from .attention import MultiHeadAttention, PositionEmbedding, SinusoidalPositionEmbedding, sinusoids
from .base import Layer, class_kinds
from .checks import batch_axis, fmt_axes, layer_error
from .recurrent import time_axis
from .transformer import TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer

__all__ = ["KVCache", "cache_axes", "cache_placeholders", "check_cacheable", "decode_step", "position_step",
           "prefill"]


@dataclass(frozen=True)
class KVCache:
    """One attention layer's cache: ``keys [D, H, REC:T, N]`` and ``values [V, H, REC:T, N]`` (ops).

    Row ``j`` of ``REC`` holds step ``j``'s key and value (``D``, ``H``, ``V`` are the layer's axes).
    """

    keys: ng.Op
    values: ng.Op


def check_cacheable(encoder: Layer, built: bool = True) -> TransformerEncoder:
    """``encoder`` if it is a ``TransformerEncoder`` of causal self-attention layers (``built``: with its
    weights made), else ``LayerError``.

    A cache holds what earlier steps computed; that is only the whole answer when no step sees a
    later one (causal) and there is no other input (a ``TransformerDecoder``'s memory).
    """
    if not isinstance(encoder, TransformerEncoder) or isinstance(encoder.layers[0], TransformerDecoderLayer):
        raise layer_error(encoder, "a TransformerEncoder (a decoder-only stack) for key/value caching",
                          type(encoder).__name__, "cache a TransformerEncoder(..., causal=True); a "
                          "TransformerDecoder's cross-attention reads a memory, not cached")
    odd = next((layer for layer in encoder.layers if not isinstance(layer, TransformerEncoderLayer)
                or isinstance(layer, TransformerDecoderLayer)), None)
    if odd is not None:  # a stack whose layers were replaced by hand
        raise layer_error(encoder, "TransformerEncoderLayers for key/value caching", type(odd).__name__,
                          "build the stack with TransformerEncoder(num_layers, num_heads, ...)")
    if not all(layer.self_attn.causal for layer in encoder.layers):
        raise layer_error(encoder, "causal self-attention (causal=True) for key/value caching", "causal=False",
                          "build the stack with TransformerEncoder(..., causal=True): without it every step "
                          "changes the earlier steps' outputs and the whole window must be re-run")
    if built and not encoder.built:
        raise layer_error(encoder, "a built stack (its weights exist)", "an unbuilt one",
                          "call the model once (or build()) before compiling the cached step")
    return encoder


def cache_axes(attn: MultiHeadAttention, time: ng.Axis, batch: ng.Axis) -> tuple[ng.Axes, ng.Axes]:
    """The axes of ``attn``'s key cache ``[D, H, time, N]`` and value cache ``[V, H, time, N]``."""
    return (ng.make_axes([attn.d_axis, attn.heads, time, batch]),
            ng.make_axes([attn.v_axis, attn.heads, time, batch]))


def cache_placeholders(encoder: Layer, context: int, batch: ng.Axis, dtype: str = "float32") -> list[KVCache]:
    """One ``KVCache`` of placeholders per layer of ``encoder`` (``REC:context``): the step's cache inputs.

    Named ``<layer>/keys`` and ``<layer>/values``, in layer order.

    Raises:
        LayerError: ``encoder`` is not a built causal ``TransformerEncoder``.

    Example:
        >>> caches = cache_placeholders(encoder, 64, ng.make_axis(1, "N"))
    """
    time = ng.make_axis(context, "REC")
    caches = []
    for layer in check_cacheable(encoder).layers:
        keys, values = cache_axes(layer.self_attn, time, batch)
        caches.append(KVCache(ng.placeholder(keys, dtype=dtype, name=f"{layer.name}/keys"),
                              ng.placeholder(values, dtype=dtype, name=f"{layer.name}/values")))
    return caches


def _scope(layer: Layer) -> AbstractContextManager[Any]:
    """The name scope ``Layer.__call__`` opens, so the step's ops are counted under their layers (``-pc``)."""
    return ng.name_scope(layer.name, kind=type(layer).__name__, kinds=class_kinds(type(layer)))


def _run_stack(encoder: TransformerEncoder, x: ng.Op, attend: Any) -> tuple[ng.Op, list[KVCache]]:
    """The stack's layers (pre- or post-norm, as each layer's ``_block``) with ``attend(i, attn, h)`` in place of
    each self-attention; returns the output and the caches ``attend`` made. Dropout is the identity here
    (graphs are built outside ``training_mode``)."""
    caches: list[KVCache] = []
    with _scope(encoder):
        for i, layer in enumerate(encoder.layers):

            def attention(h: ng.Op, i: int = i, layer: TransformerEncoderLayer = layer) -> ng.Op:
                with _scope(layer.self_attn):
                    y, cache = attend(i, layer.self_attn, h)
                caches.append(cache)
                return y

            with _scope(layer):
                x = layer._block(x, layer.norm1, attention, layer.drop1)
                x = layer._block(x, layer.norm2, layer.feed_forward, layer.drop2)
        return (encoder.final_norm(x) if encoder.final_norm is not None else x), caches


def prefill(encoder: Layer, x: ng.Op) -> tuple[ng.Op, list[KVCache]]:
    """The causal stack over the window ``x [F, REC:T, N]`` (what ``encoder(x)`` computes) and its caches.

    Args:
        encoder: a causal ``TransformerEncoder`` (built here if it is not).
        x: the window's input (embedded tokens plus positions).

    Returns:
        ``(output [F, REC:T, N], [KVCache per layer])``, the caches ``[D, H, REC:T, N]`` and ``[V, H, REC:T, N]``.

    Raises:
        LayerError: not a causal ``TransformerEncoder``; an input that is not ``[F, REC, N]``.

    Example:
        >>> h, caches = prefill(model.layers["decoder"], position(embed(window)))
    """
    encoder = check_cacheable(encoder, built=False)
    time, batch = time_axis(encoder, x), batch_axis(encoder, x)
    if not encoder.built:
        encoder(x)  # builds the weights (this first graph is not used)

    def attend(i: int, attn: MultiHeadAttention, h: ng.Op) -> tuple[ng.Op, KVCache]:
        q, k, v = attn.project(h, h)
        o = ng.scaled_dot_product_attention(q, k, v, causal=True)
        keys, values = cache_axes(attn, time, batch)
        return attn.merge_heads(o, h), KVCache(ng.axes_with_order(k, keys), ng.axes_with_order(v, values))

    return _run_stack(encoder, x, attend)


def _write_row(cache: ng.Op, new: ng.Op, step: ng.Axis, row: ng.Op) -> ng.Op:
    """``cache`` with its ``REC`` row picked by ``row`` (a one-hot ``[REC, N]``) replaced by ``new`` (``REC:1``)."""
    fresh = ng.slice_along_axis(new, step, 0)  # [D, H, N]: the one new step
    return ng.axes_with_order(ng.where(row, fresh, cache), cache.axes)


def decode_step(encoder: Layer, x: ng.Op, caches: list[KVCache], position: ng.Op) -> tuple[ng.Op, list[KVCache]]:
    """The causal stack over one new step ``x [F, REC:1, N]`` at ``position``, reading and writing the caches.

    Args:
        encoder: a built causal ``TransformerEncoder``.
        x: the new step's input (its token embedded, plus its position: ``position_step``).
        caches: one ``KVCache`` per layer (``cache_placeholders``), rows ``< position`` filled.
        position: int ``[N]``, each example's step (``0 <= position < T``).

    Returns:
        ``(output [F, REC:1, N], [KVCache per layer])``: the caches with row ``position`` written.

    Raises:
        LayerError: not a built causal ``TransformerEncoder``; ``x`` not one step; caches of another
            count or axes; a position that is not an int ``[N]``.

    Example:
        >>> y, written = decode_step(encoder, h, caches, position)
    """
    encoder = check_cacheable(encoder)
    step, batch = time_axis(encoder, x), batch_axis(encoder, x)
    if step.length != 1:
        raise layer_error(encoder, "one new step x [F, REC:1, N]", fmt_axes(x.axes),
                          "the cached step reads one token; run prefill() for a window")
    if len(caches) != len(encoder.layers):
        raise layer_error(encoder, f"{len(encoder.layers)} caches (one per layer)", len(caches),
                          "make them with cache_placeholders(encoder, context, N)")
    if not position.dtype.startswith(("int", "uint")) or position.axes != ng.make_axes([batch]):
        raise layer_error(encoder, f"an int position [{batch}]", f"{position.dtype} {fmt_axes(position.axes)}",
                          "ng.placeholder([N], dtype='int32'): each example's step")
    time = caches[0].keys.axes.recurrent_axis
    row = ng.one_hot(position, time)  # [REC:T, N]: where this step's key and value go
    seen = position + 1  # key_lengths: the steps <= position

    def attend(i: int, attn: MultiHeadAttention, h: ng.Op) -> tuple[ng.Op, KVCache]:
        cache = caches[i]
        expected = cache_axes(attn, time, batch)
        for op, axes in zip((cache.keys, cache.values), expected, strict=True):
            if not op.axes.same_set(axes):
                raise layer_error(attn, f"a cache with axes {fmt_axes(axes)}", fmt_axes(op.axes),
                                  "make the caches with cache_placeholders(encoder, context, N)")
        q, k, v = attn.project(h, h)
        keys = _write_row(ng.axes_with_order(cache.keys, expected[0]), k, step, row)
        values = _write_row(ng.axes_with_order(cache.values, expected[1]), v, step, row)
        o = ng.scaled_dot_product_attention(q, keys, values, key_lengths=seen)
        return attn.merge_heads(o, h), KVCache(keys, values)

    return _run_stack(encoder, x, attend)


def position_step(layer: Layer, x: ng.Op, position: ng.Op, context: int) -> ng.Op:
    """``x [F, REC:1, N]`` plus the position embedding's row ``position`` (int ``[N]``): one step of ``layer(window)``.

    Args:
        layer: a built ``PositionEmbedding`` or a ``SinusoidalPositionEmbedding``.
        x: the new step's embedded token.
        position: int ``[N]``.
        context: the window's length (the sinusoid table's; a ``PositionEmbedding`` holds ``max_length`` rows).

    Raises:
        LayerError: another layer kind, or a context beyond a ``PositionEmbedding``'s ``max_length``.

    Example:
        >>> h = position_step(model.layers["position"], embed(token), position, 64)
    """
    if isinstance(layer, PositionEmbedding):
        if context > layer.max_length:
            raise layer_error(layer, f"a context of at most max_length={layer.max_length}", context,
                              "generate within the positions the model was built with")
        rows = ng.gather(layer.P, position, layer.positions)  # [F, N]
    elif isinstance(layer, SinusoidalPositionEmbedding):
        feature = next(a for a in x.axes if not (a.is_batch or a.is_recurrent))
        table = ng.constant(sinusoids(context, feature.length, layer.base), [feature, ng.make_axis(context, "P")],
                            dtype=x.dtype)
        rows = ng.gather(table, position, "P")
    else:
        raise layer_error(layer, "a PositionEmbedding or SinusoidalPositionEmbedding", type(layer).__name__,
                          "the cached step knows these two position encodings")
    return ng.axes_with_order(x + rows, x.axes)
