"""Attention layers: ``LayerNorm``, ``MultiHeadAttention``, ``PositionEmbedding``, ``SinusoidalPositionEmbedding``.

Layout (neon's, as the recurrent layers): a sequence is ``[F, REC, N]``, features first, time
``REC``, batch ``N`` last. Every layer here returns the input's axes, so residual sums
(``x + attention(x)``) need no renaming.

``MultiHeadAttention`` projects to ``[D, H, REC, N]`` (``D`` the per-head features, ``H`` the
heads; axes named ``<layer>_D``, ``<layer>_H``, ``<layer>_V`` for the values' features) and runs
``ng.scaled_dot_product_attention``, which keeps ``H`` and ``N``. Its call takes keywords:
``mha(x)`` is self-attention, ``mha(x, memory)`` cross-attention (keys and values from
``memory [Fm, REC, N]``, any length); ``lengths=`` (int ``[N]``, or ``sequence_lengths``' value)
hides padded key steps of ``x`` in self-attention, ``memory_lengths=`` those of ``memory``.
"""

from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import ngraph_core as ng
from neon import initializers

from .base import Layer, is_training
from .checks import (
    as_initializer,
    batch_axis,
    feature_axes,
    feature_axis,
    finite_float,
    fmt_axes,
    layer_error,
    positive_int,
    same_axes,
)
from .recurrent import check_lengths, time_axis


def _one_feature_axis(layer: Layer, x: ng.Op) -> ng.Axis:
    """The input's only feature axis (attention layers work on ``[F, REC, N]``), or ``LayerError``."""
    found = feature_axes(x)
    if len(found) != 1:
        raise layer_error(layer, "a sequence [F, REC, N] with one feature axis", fmt_axes(x.axes),
                          "Flatten the features first, or lay the input out as [F, REC, N]")
    return found[0]


def _seed(layer: Layer, seed: Any) -> int | None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise layer_error(layer, "seed to be an int or None", repr(seed), f"e.g. {type(layer).__name__}(..., seed=0)")
    return seed


class LayerNorm(Layer):
    """``(x - mean) / sqrt(var + eps) * gamma + beta``, the statistics over the feature axes (``ng.layer_norm``).

    The feature axes are every axis but ``N`` and ``REC`` (``F`` of ``[F, REC, N]``): one mean and
    variance per time step of each example, as PyTorch's ``nn.LayerNorm(F)``. Variables: ``gamma``
    (init 1, label ``scale``) and ``beta`` (init 0, label ``bias``) over the feature axes.

    Args:
        eps: added to the variance, > 0.
        name: the layer's name.

    Raises:
        LayerError: ``eps`` not positive; at call, an input without a feature axis.

    Example:
        >>> y = LayerNorm()(x)  # x [F, REC, N]
    """

    def __init__(self, eps: float = 1e-5, name: str | None = None) -> None:
        super().__init__(name)
        self.eps = finite_float(self, "eps", eps, 0.0, float("inf"), low_open=True, high_open=True)

    def build(self, x: ng.Op) -> None:
        feature_axis(self, x)
        self.axes = feature_axes(x)
        self.gamma = self.add_variable("gamma", self.axes, 1.0, labels=("scale",))
        self.beta = self.add_variable("beta", self.axes, 0.0, labels=("bias",))

    def call(self, x: ng.Op) -> ng.Op:
        same_axes(self, feature_axes(x), self.axes, "feature axes")
        return ng.layer_norm(x, self.axes, self.gamma, self.beta, eps=self.eps)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "eps": self.eps}


@dataclass(frozen=True)
class AttentionCall:
    """The keywords of one ``MultiHeadAttention`` call."""

    memory: ng.Op | None = None
    lengths: ng.Op | None = None
    memory_lengths: ng.Op | None = None


_NO_CALL = AttentionCall()  # frozen: a safe default
_call: contextvars.ContextVar[AttentionCall] = contextvars.ContextVar("neon_attention_call",
                                                                     default=_NO_CALL)  # noqa: B039


class MultiHeadAttention(Layer):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017), self or cross: ``[F, REC, N] -> [F, REC, N]``.

    ``q = Wq . x + bq``, ``k = Wk . m + bk``, ``v = Wv . m + bv`` (``m`` is ``memory``, or ``x`` itself),
    each ``[D, H, REC, N]``; ``o = scaled_dot_product_attention(q, k, v)``; the output is
    ``Wo . o + bo`` on the input's feature axis. Variables: ``Wq``, ``Wk`` ``[D, H, F]``, ``Wv``
    ``[V, H, Fm]``, ``Wo`` ``[F, V, H]`` (label ``weight``) and, with ``bias``, ``bq``, ``bk``, ``bv``,
    ``bo`` (label ``bias``). PyTorch's ``in_proj_weight`` rows ``h * D + d`` are ``Wq[d, h, :]``.

    Args:
        num_heads: the number of heads ``H`` (> 0).
        head_dim: the per-head features ``D``; default ``F // num_heads`` (``F`` must divide).
        value_dim: the per-head value features ``V``; default ``head_dim``.
        causal: each query step sees only key steps up to its own.
        dropout: the probability of dropping an attention weight in training mode, in [0, 1).
        bias: add the four biases.
        init: initializer of the weights; default ``GlorotUniform()``.
        seed: seeds the dropout mask (None: the transformer's seed).
        name: the layer's name (the ``D``, ``H``, ``V`` axes are named after it).

    Call: ``mha(x, memory=None, *, lengths=None, memory_lengths=None)``.

    Raises:
        LayerError: a bad option; at call, an input that is not ``[F, REC, N]``, ``F`` not divisible
            by ``num_heads`` (without ``head_dim``), bad lengths.

    Example:
        >>> y = MultiHeadAttention(4, causal=True)(x, lengths=lengths)  # x [F:64, REC:20, N:8]
        >>> z = MultiHeadAttention(4)(y, memory, memory_lengths=source_lengths)  # cross-attention
    """

    def __init__(self, num_heads: int, head_dim: int | None = None, value_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, bias: bool = True, init: Any = None,
                 seed: int | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self.num_heads = positive_int(self, "num_heads", num_heads)
        self.head_dim = None if head_dim is None else positive_int(self, "head_dim", head_dim)
        self.value_dim = None if value_dim is None else positive_int(self, "value_dim", value_dim)
        for key, value in (("causal", causal), ("bias", bias)):
            if not isinstance(value, bool):
                raise layer_error(self, f"{key} to be a bool", repr(value), f"pass {key}=True or False")
        self.causal, self.bias = causal, bias
        self.dropout = finite_float(self, "dropout", dropout, 0.0, 1.0, high_open=True)
        self.init = as_initializer(self, "init", initializers.GlorotUniform() if init is None else init)
        self.seed = _seed(self, seed)

    def __call__(self, x: ng.Op, memory: ng.Op | None = None, *,  # type: ignore[override]
                 lengths: ng.Op | None = None, memory_lengths: ng.Op | None = None) -> ng.Op:
        if memory is None and memory_lengths is not None:
            raise layer_error(self, "memory_lengths only with a memory (cross-attention)", "memory_lengths alone",
                              "in self-attention pass lengths=")
        token = _call.set(AttentionCall(memory, lengths, memory_lengths))
        try:
            return super().__call__(x)
        finally:
            _call.reset(token)

    def _source(self, x: ng.Op) -> ng.Op:
        memory = _call.get().memory
        if memory is not None and not isinstance(memory, ng.Op):
            raise layer_error(self, "memory as an ngraph op [Fm, REC, N]", type(memory).__name__,
                              "pass the encoder's output op")
        return x if memory is None else memory

    def build(self, x: ng.Op) -> None:
        source = self._source(x)
        self.in_axis, self.source_axis = _one_feature_axis(self, x), _one_feature_axis(self, source)
        head_dim = self.head_dim
        if head_dim is None:
            if self.in_axis.length % self.num_heads:
                raise layer_error(self, f"a feature length divisible by num_heads={self.num_heads}",
                                  fmt_axes(x.axes), "pass head_dim= or another num_heads")
            head_dim = self.in_axis.length // self.num_heads
        value_dim = self.value_dim or head_dim
        self.heads = ng.make_axis(self.num_heads, f"{self.name}_H")
        self.d_axis = ng.make_axis(head_dim, f"{self.name}_D")
        self.v_axis = ng.make_axis(value_dim, f"{self.name}_V")
        h, d, v, f, fm = self.heads, self.d_axis, self.v_axis, self.in_axis, self.source_axis
        self.Wq = self.add_variable("Wq", [d, h, f], self.init, labels=("weight",))
        self.Wk = self.add_variable("Wk", [d, h, fm], self.init, labels=("weight",))
        self.Wv = self.add_variable("Wv", [v, h, fm], self.init, labels=("weight",))
        self.Wo = self.add_variable("Wo", [f, v, h], self.init, labels=("weight",))
        if self.bias:
            self.bq = self.add_variable("bq", [d, h], 0.0, labels=("bias",))
            self.bk = self.add_variable("bk", [d, h], 0.0, labels=("bias",))
            self.bv = self.add_variable("bv", [v, h], 0.0, labels=("bias",))
            self.bo = self.add_variable("bo", [f], 0.0, labels=("bias",))

    def call(self, x: ng.Op) -> ng.Op:
        options = _call.get()
        source = self._source(x)
        same_axes(self, [_one_feature_axis(self, x)], [self.in_axis], "feature axis")
        same_axes(self, [_one_feature_axis(self, source)], [self.source_axis], "memory feature axis")
        time_axis(self, x)
        time_axis(self, source)
        batch_axis(self, x)
        if options.memory is None:
            key_lengths = check_lengths(self, x, options.lengths)
        else:
            key_lengths = None if options.memory_lengths is None else check_lengths(self, source,
                                                                                    options.memory_lengths)
        q, k, v = self.project(x, source)
        dropout = self.dropout if is_training() else 0.0
        o = ng.scaled_dot_product_attention(q, k, v, causal=self.causal, key_lengths=key_lengths, dropout=dropout,
                                            seed=self.seed)
        return self.merge_heads(o, x)

    def project(self, x: ng.Op, source: ng.Op) -> tuple[ng.Op, ng.Op, ng.Op]:
        """The queries of ``x`` and the keys and values of ``source``, each ``[D|V, H, REC, N]`` (biases added).

        The built layer's projections, also used by the key/value-cached step (``neon.layers.kv_cache``).
        """
        q, k, v = ng.dot(self.Wq, x), ng.dot(self.Wk, source), ng.dot(self.Wv, source)
        if self.bias:
            q, k, v = q + self.bq, k + self.bk, v + self.bv
        return q, k, v

    def merge_heads(self, o: ng.Op, x: ng.Op) -> ng.Op:
        """The output projection ``Wo . o + bo`` of the heads' outputs ``o [V, H, REC, N]``, in ``x``'s axes order."""
        y = ng.dot(self.Wo, o)
        y = ng.axes_with_order(y, x.axes) if y.axes != x.axes and y.axes.same_set(x.axes) else y
        return y + self.bo if self.bias else y

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"name": self.name, "num_heads": self.num_heads, "head_dim": self.head_dim,
                                  "value_dim": self.value_dim, "causal": self.causal, "dropout": self.dropout,
                                  "bias": self.bias, "init": initializers.serialize(self.init)}
        if self.seed is not None:
            config["seed"] = self.seed
        return config


def _check_length(layer: Layer, x: ng.Op, max_length: int) -> ng.Axis:
    rec = time_axis(layer, x)
    if rec.length > max_length:
        raise layer_error(layer, f"a sequence of at most max_length={max_length} steps", fmt_axes(x.axes),
                          "raise max_length, or cut the sequences")
    return rec


class PositionEmbedding(Layer):
    """``x + P[:, :T]``: a learned embedding of each time step, added to ``[F, REC, N]`` (BERT, GPT-2).

    The variable ``P`` (label ``embedding``) has axes ``[F, <layer>_P:max_length]``; a sequence of
    ``T <= max_length`` steps adds its first ``T`` columns.

    Args:
        max_length: the longest sequence (> 0).
        init: initializer of ``P``; default ``Gaussian(0, 0.02)``.
        name: the layer's name.

    Raises:
        LayerError: a bad ``max_length`` or init; at call, a sequence longer than ``max_length``.

    Example:
        >>> h = PositionEmbedding(512)(LookupTable(64, vocab)(tokens))  # [F:64, REC:T, N]
    """

    def __init__(self, max_length: int, init: Any = None, name: str | None = None) -> None:
        super().__init__(name)
        self.max_length = positive_int(self, "max_length", max_length)
        self.init = as_initializer(self, "init", initializers.Gaussian(0.0, 0.02) if init is None else init)

    def build(self, x: ng.Op) -> None:
        self.axis = _one_feature_axis(self, x)
        self.positions = ng.make_axis(self.max_length, f"{self.name}_P")
        self.P = self.add_variable("P", [self.axis, self.positions], self.init, labels=("embedding",))

    def call(self, x: ng.Op) -> ng.Op:
        same_axes(self, [_one_feature_axis(self, x)], [self.axis], "feature axis")
        rec = _check_length(self, x, self.max_length)
        table = ng.tensor_slice(self.P, [slice(None), slice(0, rec.length)])
        return x + ng.cast_axes(table, [self.axis, rec])

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "max_length": self.max_length, "init": initializers.serialize(self.init)}


def sinusoids(length: int, features: int, base: float = 10000.0) -> np.ndarray:
    """The ``[features, length]`` table ``sin(t / base**(2i/F))`` (even rows ``2i``), ``cos`` (odd rows ``2i+1``).

    Example:
        >>> sinusoids(3, 4)[:, 0]  # step 0
        array([0., 1., 0., 1.])
    """
    steps = np.arange(length, dtype=np.float64)
    rates = base ** (-np.arange(0, features, 2, dtype=np.float64) / features)
    table = np.zeros((features, length))
    table[0::2] = np.sin(rates[:, None] * steps)
    table[1::2] = np.cos(rates[: features // 2, None] * steps)
    return table


class SinusoidalPositionEmbedding(Layer):
    """``x + sinusoids(T, F)``: the fixed position encoding of Vaswani et al. (no variables).

    Row ``2i`` of the added ``[F, REC]`` table is ``sin(t / base**(2i/F))``, row ``2i+1`` its ``cos``.

    Args:
        base: the wavelength base (> 0; 10000 in the paper).
        name: the layer's name.

    Example:
        >>> h = SinusoidalPositionEmbedding()(x)  # x [F, REC, N]
    """

    def __init__(self, base: float = 10000.0, name: str | None = None) -> None:
        super().__init__(name)
        self.base = finite_float(self, "base", base, 0.0, math.inf, low_open=True, high_open=True)

    def call(self, x: ng.Op) -> ng.Op:
        feature, rec = _one_feature_axis(self, x), time_axis(self, x)
        return x + ng.constant(sinusoids(rec.length, feature.length, self.base), [feature, rec], dtype=x.dtype)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "base": self.base}
