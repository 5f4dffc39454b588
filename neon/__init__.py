"""neon: layers, containers and training over the ngraph_core graph compiler.

Example:
    >>> from neon import Sequential
    >>> from neon.layers import Affine
    >>> mlp = Sequential([Affine(100, activation="relu"), Affine(10, activation="softmax")])
"""

from .containers import Sequential

__all__ = ["Sequential"]
