"""Transformers (backends): ``make_transformer(backend="numpy" | "cupy", **options)``.

``base.py`` (the transformer protocol and the executor) and ``kernels/`` (one kernel per op, written once
against ``xp``) are shared; each backend is a package of its own (``numpy/``, ``cupy/``), which shared code
never imports. See docs/architecture.md, "The transformers".
"""

from . import cupy, numpy
from .base import Computation, Transformer
from .registry import make_transformer, register_transformer, transformer_choices

__all__ = ["Computation", "Transformer", "make_transformer", "register_transformer", "transformer_choices",
           "cupy", "numpy"]
