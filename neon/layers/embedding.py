"""``LookupTable``: word embeddings, looked up as ``ng.gather(W, ids, V)``.

The lookup reads one column of ``W`` per id and its gradient scatter-adds the upstream
gradient into those columns (``ng.scatter_add``): O(embedding_dim) work per id, where the
earlier ``W · one_hot(ids)`` cost O(vocab_size x embedding_dim) per id. Values, axes,
variable names and checkpoint keys are unchanged.
"""

from __future__ import annotations

from typing import Any

import ngraph_core as ng
from neon import initializers

from .base import Layer
from .checks import as_initializer, free_name, layer_error, positive_int


class LookupTable(Layer):
    """Maps integer ids to learned vectors: ids ``[REC, N]`` (or ``[N]``, or any axes) ->
    ``[E, REC, N]``.

    The table ``W`` has axes ``[E:embedding_dim, V:vocab_size]`` (output axis first, like
    ``Linear``; PyTorch's ``Embedding.weight`` is its transpose). ``E`` is named after the
    layer. Ids may be fed as an integer or a float placeholder holding whole numbers;
    an id outside ``[0, vocab_size)`` looks up a zero vector (a graph cannot raise at run time).

    Args:
        vocab_size: number of ids (> 0).
        embedding_dim: length of a vector (> 0).
        init: initializer of ``W``; default ``Uniform(-0.05, 0.05)``.
        name: the layer's name.

    Raises:
        LayerError: a non-positive size; at call, a boolean input or one with an axis
            named like the layer's own axes.

    Example:
        >>> ids = ng.placeholder([REC, N], dtype="int64")
        >>> vectors = LookupTable(1000, 64)(ids)  # [LookupTable_0:64, REC, N]
    """

    def __init__(self, vocab_size: int, embedding_dim: int, init: Any = None, name: str | None = None) -> None:
        super().__init__(name)
        self.vocab_size = positive_int(self, "vocab_size", vocab_size)
        self.embedding_dim = positive_int(self, "embedding_dim", embedding_dim)
        self.init = as_initializer(self, "init", initializers.Uniform(-0.05, 0.05) if init is None else init)

    def build(self, x: ng.Op) -> None:
        # made at build, from the name the layer's parent gave it
        self.out_axis = ng.make_axis(self.embedding_dim, name=self.name)
        self.vocab_axis = ng.make_axis(self.vocab_size, name=f"{self.name}_vocab")
        self.W = self.add_variable("W", [self.out_axis, self.vocab_axis], self.init, labels=("weight",))

    def call(self, x: ng.Op) -> ng.Op:
        if x.dtype == "bool":
            raise layer_error(self, "integer ids (an int or float input)", f"a {x.dtype} input",
                              "cast with ng.cast(ids, 'int64')")
        free_name(self, x, self.out_axis.name)
        free_name(self, x, self.vocab_axis.name)
        # float ids hold whole numbers (documented); the gather op takes integers
        ids = x if x.dtype.startswith(("int", "uint")) else ng.cast(x, "int64")
        return ng.gather(self.W, ids, self.vocab_axis)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "vocab_size": self.vocab_size, "embedding_dim": self.embedding_dim,
                "init": initializers.serialize(self.init)}
