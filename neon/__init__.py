"""neon: layers, containers and training over the ngraph_core graph compiler.

Example:
    >>> from neon import Model, Sequential
    >>> from neon.layers import Affine
    >>> model = Model(Sequential([Affine(100, activation="relu"), Affine(10, activation="softmax")]))
"""

from . import distributed
from .containers import Sequential
from .model import Model
from .saving import load_model

__version__ = "0.1.0"  # the ngraph-neon distribution's version (setup.cfg), shared with ngraph_core

__all__ = ["Model", "Sequential", "distributed", "load_model", "__version__"]
