"""What a kernel factory may ask of its transformer: the array module, dtypes and seeds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...ir import Op

Kernel = Callable[..., Any]


@dataclass(frozen=True)
class KernelContext:
    """Handed to every kernel factory at compile time.

    Attributes:
        xp: the array module (numpy or cupy).
        dtype_of: the dtype an op's value has on this transformer (float32 may run as float64).
        seed_for: the seed of a random op's generator.

    Calling convention: a kernel for an op that owns a buffer (not in
    ``OpGroup.NO_BUFFER``) is called as ``kernel(out, *inputs)`` and writes its value
    into ``out`` (C-contiguous, the op's shape and dtype: a planned arena view, or a
    fresh array for a result); other kernels are called as ``kernel(*inputs)``.
    """

    xp: Any
    dtype_of: Callable[[Op], str]
    seed_for: Callable[[Op], int]


KernelFactory = Callable[[Op, KernelContext], Kernel]
