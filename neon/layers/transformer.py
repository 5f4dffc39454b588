"""Transformer blocks: ``FeedForward``, ``TransformerEncoderLayer``, ``TransformerDecoderLayer``,
``TransformerEncoder``.

Each block maps ``[F, REC, N]`` to the same axes and follows PyTorch's ``nn.TransformerEncoderLayer`` /
``nn.TransformerDecoderLayer`` (so their weights copy over one to one):

* post-norm (``norm_first=False``, the paper's): ``x = norm1(x + drop(attn(x)))``, then
  ``x = norm2(x + drop(ff(x)))``;
* pre-norm (``norm_first=True``): ``x = x + drop(attn(norm1(x)))``, then ``x = x + drop(ff(norm2(x)))``;

the decoder adds a cross-attention block on the encoder's ``memory`` between the two, with ``norm2``,
its feed-forward block then using ``norm3``. Calls take keywords: ``layer(x, lengths=...)``,
``decoder(x, memory, lengths=..., memory_lengths=...)``; ``lengths`` (int ``[N]``) hides padded key
steps (``sequence_lengths`` gives a default).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

import ngraph_core as ng
from neon import activations, initializers

from .attention import LayerNorm, MultiHeadAttention, _one_feature_axis
from .base import Layer, name_children
from .checks import as_activation, as_initializer, finite_float, layer_error, positive_int, same_axes
from .composite import CompositeLayer
from .dropout import Dropout


class FeedForward(Layer):
    """``W2 . drop(act(W1 . x + b1)) + b2`` on the feature axis: the position-wise block of a Transformer.

    Variables: ``W1`` ``[<layer>_hidden:hidden, F]``, ``b1``, ``W2`` ``[F, <layer>_hidden]``, ``b2`` ``[F]``;
    the output has the input's axes.

    Args:
        hidden: the hidden size (> 0).
        activation: an activation (``"relu"``, ``"gelu"``, an object or a config).
        dropout: the probability of dropping a hidden unit in training mode, in [0, 1).
        init: initializer of the weights; default ``GlorotUniform()``.
        name: the layer's name.

    Example:
        >>> y = FeedForward(256, activation="gelu")(x)  # x [F:64, REC, N] -> [F:64, REC, N]
    """

    def __init__(self, hidden: int, activation: Any = "relu", dropout: float = 0.0, init: Any = None,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.hidden = positive_int(self, "hidden", hidden)
        self.activation = as_activation(self, activation)
        self.dropout = finite_float(self, "dropout", dropout, 0.0, 1.0, high_open=True)
        self.init = as_initializer(self, "init", initializers.GlorotUniform() if init is None else init)
        self.drop = Dropout(keep=1.0 - self.dropout, name="Dropout_0")

    def build(self, x: ng.Op) -> None:
        self.axis = _one_feature_axis(self, x)
        hidden = ng.make_axis(self.hidden, f"{self.name}_hidden")
        self.W1 = self.add_variable("W1", [hidden, self.axis], self.init, labels=("weight",))
        self.b1 = self.add_variable("b1", [hidden], 0.0, labels=("bias",))
        self.W2 = self.add_variable("W2", [self.axis, hidden], self.init, labels=("weight",))
        self.b2 = self.add_variable("b2", [self.axis], 0.0, labels=("bias",))

    def call(self, x: ng.Op) -> ng.Op:
        same_axes(self, [_one_feature_axis(self, x)], [self.axis], "feature axis")
        h = self.drop(self.activation(ng.dot(self.W1, x) + self.b1))
        y = ng.dot(self.W2, h) + self.b2
        return ng.axes_with_order(y, x.axes)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "hidden": self.hidden, "activation": activations.serialize(self.activation),
                "dropout": self.dropout, "init": initializers.serialize(self.init)}


@dataclass(frozen=True)
class BlockCall:
    """The keywords of one Transformer block call."""

    memory: ng.Op | None = None
    lengths: ng.Op | None = None
    memory_lengths: ng.Op | None = None


_NO_CALL = BlockCall()  # frozen: a safe default
_call: contextvars.ContextVar[BlockCall] = contextvars.ContextVar("neon_transformer_call",
                                                                 default=_NO_CALL)  # noqa: B039


class TransformerEncoderLayer(CompositeLayer):
    """Self-attention then a feed-forward block, each with a residual sum and ``LayerNorm`` (module docstring).

    Sub-layers: ``MultiHeadAttention_0`` (``self_attn``), ``FeedForward_0`` (``feed_forward``),
    ``LayerNorm_0``/``LayerNorm_1`` (``norm1``/``norm2``), ``Dropout_0``/``Dropout_1`` after the two blocks.

    Args:
        num_heads: attention heads (> 0; the feature length must divide by it).
        dim_feedforward: the feed-forward hidden size (> 0).
        dropout: the dropout probability of the attention weights, the hidden units and the two
            block outputs, in training mode; in [0, 1).
        activation: the feed-forward activation, ``"relu"`` or ``"gelu"`` (or any activation).
        norm_first: pre-norm (True) or post-norm (False).
        eps: the layer norms' eps.
        causal: self-attention sees only earlier steps (a decoder-only model).
        name: the layer's name.

    Call: ``layer(x, *, lengths=None)``, ``x [F, REC, N]``.

    Example:
        >>> y = TransformerEncoderLayer(4, 256, dropout=0.1, norm_first=True)(x, lengths=lengths)
    """

    def __init__(self, num_heads: int, dim_feedforward: int = 2048, dropout: float = 0.1, activation: Any = "relu",
                 norm_first: bool = False, eps: float = 1e-5, causal: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(norm_first, bool):
            raise layer_error(self, "norm_first to be a bool", repr(norm_first), "pass norm_first=True or False")
        self.norm_first = norm_first
        self.dropout = finite_float(self, "dropout", dropout, 0.0, 1.0, high_open=True)
        self.self_attn = MultiHeadAttention(num_heads, causal=causal, dropout=self.dropout, name="MultiHeadAttention_0")
        self.feed_forward = FeedForward(dim_feedforward, activation, dropout=self.dropout, name="FeedForward_0")
        self.norm1, self.norm2 = LayerNorm(eps, name="LayerNorm_0"), LayerNorm(eps, name="LayerNorm_1")
        self.drop1 = Dropout(1.0 - self.dropout, name="Dropout_0")
        self.drop2 = Dropout(1.0 - self.dropout, name="Dropout_1")

    @property
    def sublayers(self) -> list[Layer]:
        return [self.self_attn, self.feed_forward, self.norm1, self.norm2, self.drop1, self.drop2]

    def __call__(self, x: ng.Op, *, lengths: ng.Op | None = None) -> ng.Op:  # type: ignore[override]
        token = _call.set(BlockCall(lengths=lengths))
        try:
            return super().__call__(x)
        finally:
            _call.reset(token)

    def _block(self, x: ng.Op, norm: Layer, block: Any, drop: Layer) -> ng.Op:
        if self.norm_first:
            return x + drop(block(norm(x)))
        return norm(x + drop(block(x)))

    def call(self, x: ng.Op) -> ng.Op:
        lengths = _call.get().lengths
        x = self._block(x, self.norm1, lambda h: self.self_attn(h, lengths=lengths), self.drop1)
        return self._block(x, self.norm2, self.feed_forward, self.drop2)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "num_heads": self.self_attn.num_heads,
                "dim_feedforward": self.feed_forward.hidden, "dropout": self.dropout,
                "activation": activations.serialize(self.feed_forward.activation), "norm_first": self.norm_first,
                "eps": self.norm1.eps, "causal": self.self_attn.causal}


class TransformerDecoderLayer(TransformerEncoderLayer):
    """Causal self-attention, cross-attention on ``memory``, then a feed-forward block (module docstring).

    Sub-layers: those of ``TransformerEncoderLayer`` plus ``MultiHeadAttention_1`` (``cross_attn``),
    ``LayerNorm_2`` (``norm3``, the feed-forward block's) and ``Dropout_2``.

    Args:
        num_heads, dim_feedforward, dropout, activation, norm_first, eps: as ``TransformerEncoderLayer``.
        causal: the self-attention sees only earlier steps (default True: a decoder predicts the next step).
        name: the layer's name.

    Call: ``layer(x, memory, *, lengths=None, memory_lengths=None)``; ``memory [Fm, REC, N]`` of any length.

    Example:
        >>> y = TransformerDecoderLayer(4, 256)(target, memory, memory_lengths=source_lengths)
    """

    def __init__(self, num_heads: int, dim_feedforward: int = 2048, dropout: float = 0.1, activation: Any = "relu",
                 norm_first: bool = False, eps: float = 1e-5, causal: bool = True, name: str | None = None) -> None:
        super().__init__(num_heads, dim_feedforward, dropout, activation, norm_first, eps, causal, name)
        self.cross_attn = MultiHeadAttention(num_heads, dropout=self.dropout, name="MultiHeadAttention_1")
        self.norm3 = LayerNorm(eps, name="LayerNorm_2")
        self.drop3 = Dropout(1.0 - self.dropout, name="Dropout_2")

    @property
    def sublayers(self) -> list[Layer]:
        return [self.self_attn, self.cross_attn, self.feed_forward, self.norm1, self.norm2, self.norm3, self.drop1,
                self.drop2, self.drop3]

    def __call__(self, x: ng.Op, memory: ng.Op | None = None, *,  # type: ignore[override]
                 lengths: ng.Op | None = None, memory_lengths: ng.Op | None = None) -> ng.Op:
        if not isinstance(memory, ng.Op):
            raise layer_error(self, "a memory op [Fm, REC, N] (the encoder's output)", type(memory).__name__,
                              "call decoder(target, memory)")
        token = _call.set(BlockCall(memory, lengths, memory_lengths))
        try:
            return Layer.__call__(self, x)
        finally:
            _call.reset(token)

    def call(self, x: ng.Op) -> ng.Op:
        options = _call.get()
        x = self._block(x, self.norm1, lambda h: self.self_attn(h, lengths=options.lengths), self.drop1)
        x = self._block(x, self.norm2, lambda h: self.cross_attn(h, options.memory,
                                                                 memory_lengths=options.memory_lengths), self.drop2)
        return self._block(x, self.norm3, self.feed_forward, self.drop3)


class TransformerEncoder(CompositeLayer):
    """A stack of ``num_layers`` ``TransformerEncoderLayer``s (``TransformerEncoderLayer_0``...), then an
    optional final ``LayerNorm`` (``final_norm``; usual after pre-norm layers, PyTorch's ``norm=``).

    Args:
        num_layers: the depth (> 0).
        num_heads, dim_feedforward, dropout, activation, norm_first, eps, causal: each layer's
            (``TransformerEncoderLayer``).
        final_norm: add ``LayerNorm_0`` after the last layer.
        name: the layer's name.

    Call: ``encoder(x, *, lengths=None)``; every layer gets the lengths.

    Example:
        >>> memory = TransformerEncoder(6, 8, 2048, norm_first=True, final_norm=True)(x, lengths=lengths)
    """

    layer_class: type[TransformerEncoderLayer] = TransformerEncoderLayer  # what the stack is made of

    def __init__(self, num_layers: int, num_heads: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", norm_first: bool = False, eps: float = 1e-5, causal: bool = False,
                 final_norm: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        self.num_layers = positive_int(self, "num_layers", num_layers)
        if not isinstance(final_norm, bool):
            raise layer_error(self, "final_norm to be a bool", repr(final_norm), "pass final_norm=True or False")
        self.layers = [self.layer_class(num_heads, dim_feedforward, dropout, activation, norm_first, eps, causal)
                       for _ in range(self.num_layers)]
        name_children(self.layers)
        self.final_norm = LayerNorm(eps, name="LayerNorm_0") if final_norm else None

    @property
    def sublayers(self) -> list[Layer]:
        return [*self.layers, *([self.final_norm] if self.final_norm is not None else [])]

    def __call__(self, x: ng.Op, *, lengths: ng.Op | None = None) -> ng.Op:  # type: ignore[override]
        token = _call.set(BlockCall(lengths=lengths))
        try:
            return super().__call__(x)
        finally:
            _call.reset(token)

    def call(self, x: ng.Op) -> ng.Op:
        lengths = _call.get().lengths
        for layer in self.layers:
            x = layer(x, lengths=lengths)
        return self.final_norm(x) if self.final_norm is not None else x

    def get_config(self) -> dict[str, Any]:
        config = self.layers[0].get_config()
        del config["name"]
        return {"name": self.name, "num_layers": self.num_layers, **config,
                "final_norm": self.final_norm is not None}


class TransformerDecoder(TransformerEncoder):
    """A stack of ``num_layers`` ``TransformerDecoderLayer``s (``TransformerDecoderLayer_0``...), each attending
    to the same ``memory``, then an optional final ``LayerNorm`` (``final_norm``; PyTorch's ``norm=``).

    Args: as ``TransformerEncoder``'s (each layer's are ``TransformerDecoderLayer``'s), ``causal`` True by default.

    Call: ``decoder(x, memory, *, lengths=None, memory_lengths=None)``; every layer gets the memory and lengths.

    Example:
        >>> y = TransformerDecoder(6, 8, 2048)(target, memory, lengths=target_lengths, memory_lengths=lengths)
    """

    layer_class = TransformerDecoderLayer

    def __init__(self, num_layers: int, num_heads: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", norm_first: bool = False, eps: float = 1e-5, causal: bool = True,
                 final_norm: bool = False, name: str | None = None) -> None:
        super().__init__(num_layers, num_heads, dim_feedforward, dropout, activation, norm_first, eps, causal,
                         final_norm, name)

    __call__ = TransformerDecoderLayer.__call__  # (x, memory, *, lengths, memory_lengths): the same keywords

    def call(self, x: ng.Op) -> ng.Op:
        options = _call.get()
        for layer in self.layers:
            x = layer(x, options.memory, lengths=options.lengths, memory_lengths=options.memory_lengths)
        return self.final_norm(x) if self.final_norm is not None else x
