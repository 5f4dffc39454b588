"""Kernels written once against an array module ``xp`` (NumPy or CuPy).

``KERNELS`` maps every computing ``OpType`` to a factory ``(op, KernelContext) -> callable``
run once at compile time, so per-step work is only the array call. Variables and
placeholders have no kernel: the executor binds their storage and feeds.
"""

from ...ir import OpType
from . import (
    attention,
    collective,
    contraction,
    control,
    conv,
    ctc,
    elementwise,
    fused,
    gather,
    indexing,
    leaf,
    movement,
    normalization,
    pool,
    reduce,
    scan,
)
from .context import Kernel, KernelContext, KernelFactory, Workspace

KERNELS: dict[OpType, KernelFactory] = {
    **attention.KERNELS,
    **elementwise.KERNELS,
    **reduce.KERNELS,
    **movement.KERNELS,
    **gather.KERNELS,
    **indexing.KERNELS,
    **contraction.KERNELS,
    **conv.KERNELS,
    **pool.KERNELS,
    **normalization.KERNELS,
    **ctc.KERNELS,
    **leaf.KERNELS,
    **control.KERNELS,
    **scan.KERNELS,
    **fused.KERNELS,
    **collective.KERNELS,
}

BOUND_BY_EXECUTOR = frozenset({OpType.VARIABLE, OpType.PLACEHOLDER})

__all__ = ["BOUND_BY_EXECUTOR", "KERNELS", "Kernel", "KernelContext", "KernelFactory", "Workspace"]
