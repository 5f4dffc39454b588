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
        out: the preallocated output buffer of an op (C-contiguous, the op's shape and
            dtype). A kernel that writes into it must not return a view of an input; the
            executor copies results before handing them to the user, so buffers are reused
            by every call of a computation.
    """

    xp: Any
    dtype_of: Callable[[Op], str]
    seed_for: Callable[[Op], int]
    out: Callable[[Op], Any]


KernelFactory = Callable[[Op, KernelContext], Kernel]
