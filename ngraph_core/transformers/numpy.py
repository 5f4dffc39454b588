"""The NumPy transformer: the reference backend (CPU)."""

from __future__ import annotations

import numpy

from .base import Transformer, register_transformer


class NumpyTransformer(Transformer):
    """Runs compiled plans with NumPy. float32 by default; ``float_dtype="float64"`` for checks."""

    name = "numpy"
    xp = numpy


register_transformer("numpy", NumpyTransformer)
