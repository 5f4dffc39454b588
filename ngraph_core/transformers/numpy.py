"""The NumPy transformer: the reference backend (CPU)."""

from __future__ import annotations

import numpy

from ..ir import OpType
from . import compiled_pool, compiled_scan, conv_choice, numba_kernels, runtime
from .base import Transformer, register_transformer


class NumpyTransformer(Transformer):
    """Runs compiled plans with NumPy. float32 by default; ``float_dtype="float64"`` for checks."""

    name = "numpy"
    xp = numpy
    # fused element-wise programs: numba loops from 256K elements (NG_KERNELS=auto), all (numba) or none (numpy)
    # pooling: compiled loops, channels split over the workers (NG_KERNELS=numpy: the shared kernels)
    # scans with small bodies: the whole loop one numba function (compiled_scan.py)
    kernel_overrides = {OpType.FUSED: numba_kernels.fused, OpType.POOL: compiled_pool.pool,
                        OpType.POOL_BPROP: compiled_pool.pool_bprop, OpType.SCAN: compiled_scan.scan}
    # convolutions: per layer, the measured fastest of im2col, Winograd F(2x2, 3x3) and one image at a time (NG_CONV)
    conv_variant = staticmethod(conv_choice.variant)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        runtime.own_cores()  # NG_THREADS > 1 (default: every core): BLAS one thread, our workers the rest


register_transformer("numpy", NumpyTransformer)
