"""The NumPy backend (CPU): everything that belongs to it, and nothing a shared kernel imports.

``transformer.py`` holds ``NumpyTransformer``; ``runtime.py`` the worker threads, the BLAS thread limit and
``NumpyRunner``, the hook through which shared kernels split work (``KernelContext.runner``); the rest are
its kernel overrides and convolution variants: ``numba_kernels.py`` (fused element-wise programs as numba
loops, on ``numba_loader.py`` and ``kernel_cache.py``), ``compiled_scan.py``, ``compiled_pool.py``,
``narrow_gemm.py``, and the per-layer convolution choice (``conv_choice.py`` over ``winograd.py``,
``conv_image.py`` and ``conv_channels_last.py``). See docs/architecture.md, "The transformers".
"""

from .transformer import NumpyTransformer

__all__ = ["NumpyTransformer"]
