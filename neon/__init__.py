"""neon: layers, containers and training over the ngraph_core graph compiler.

Example:
    >>> from neon import Model, Sequential
    >>> from neon.layers import Affine
    >>> model = Model(Sequential([Affine(100, activation="relu"), Affine(10, activation="softmax")]))
"""

from .containers import Sequential
from .model import Model

__all__ = ["Model", "Sequential"]
