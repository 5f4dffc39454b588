"""The dtypes of the IR, and how mixing them promotes: the lowest floor of ``ir``, read by inference and codecs."""

from __future__ import annotations

import numpy as np

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def promote(*dtypes: str) -> str:
    """Result dtype of mixing ``dtypes``: the widest float if any operand is float, else the widest int.

    Unlike NumPy, ``int64`` with ``float32`` gives ``float32`` (integers are indices and
    counts here; they should not widen the float work).
    """
    floats = [d for d in dtypes if is_float(d)]
    pool = floats or list(dtypes)
    return max(pool, key=lambda d: (np.dtype(d).itemsize, d != "bool"))
