"""Transformers (backends): ``make_transformer(backend="numpy" | "cupy", **options)``."""

from . import cupy, numpy
from .base import Computation, Transformer, make_transformer, register_transformer, transformer_choices

__all__ = ["Computation", "Transformer", "make_transformer", "register_transformer", "transformer_choices",
           "cupy", "numpy"]
