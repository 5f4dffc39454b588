"""The NumPy transformer: the reference backend (CPU)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy

from ...ir import Op, OpType, toposort
from ..base import Transformer
from ..registry import register_transformer
from . import compiled_pool, compiled_scan, conv_choice, fused_attention, numba_kernels, runtime

SECTIONS = frozenset({OpType.CONV, OpType.CONV_BPROP_DATA, OpType.CONV_BPROP_FILTER, OpType.POOL, OpType.POOL_BPROP})
"""Ops whose kernels split long sections of work over the runtime's workers (``blas_threads``)."""


class NumpyTransformer(Transformer):
    """Runs compiled plans with NumPy. float32 by default; ``float_dtype="float64"`` for checks."""

    name = "numpy"
    xp = numpy
    # fused element-wise programs: numba loops from 256K elements (NG_KERNELS=auto), all (numba) or none (numpy)
    # pooling: compiled loops, channels split over the workers (NG_KERNELS=numpy: the shared kernels)
    # scans with small bodies: the whole loop one numba function (compiled_scan.py)
    # attention (made by passes/attention.py): the tiled kernel with a compiled softmax step (fused_attention.py)
    kernel_overrides = {OpType.FUSED: numba_kernels.fused, OpType.POOL: compiled_pool.pool,
                        OpType.POOL_BPROP: compiled_pool.pool_bprop, OpType.SCAN: compiled_scan.scan,
                        OpType.FUSED_ATTENTION: fused_attention.attention}
    compiled_elementwise = numba_kernels.SUPPORTED  # the steps numba compiles (ngraph_core/catalog.py reads it)
    # convolutions: per layer, the measured fastest of im2col, Winograd F(2x2, 3x3), one image at a time and (few
    # output positions) channels last with a compiled GEMM (NG_CONV)
    conv_variant = staticmethod(conv_choice.variant)
    runner = runtime.NumpyRunner(numpy)  # kernels split sections and GEMMs over the runtime's workers

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        runtime.own_cores()  # NG_THREADS > 1: BLAS one thread, our workers the rest; ranks: BLAS at their share

    def blas_threads(self, order: Sequence[Op]) -> bool:
        """True (with several workers) for a computation with no convolution or pooling, in its graph or its
        scan bodies. Its big GEMMs then run on BLAS's own threads (``runtime.blas_matmul``), which split a lone
        GEMM better than our parts; after a call OpenBLAS's workers spin for ~0.1 s and would take a core from
        the convolution sections that follow (measured, two threads, every split GEMM on BLAS's threads: MLP
        step 0.92 of the time, LSTM 0.83, small CNN 1.60). Fused programs split over the workers (the MLP's and
        the LSTM's weight updates) are short memory-bound passes, and the MLP and LSTM gained with them."""
        if runtime.threads() == 1:
            return False
        stack = list(order)
        while stack:
            op = stack.pop()
            if op.op in SECTIONS:
                return False
            body = getattr(op.arg, "body", None)
            if body is not None:
                stack.extend(toposort(list(body.roots)))
        return True


register_transformer("numpy", NumpyTransformer)
