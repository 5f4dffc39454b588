"""The CuPy backend (NVIDIA GPUs): everything that belongs to it, and nothing a shared kernel imports.

``transformer.py`` holds ``CupyTransformer``, ``load_cupy`` and the CUDA graph runner; its kernel overrides
are generated CUDA kernels for element-wise programs (``elementwise.py``) and CTC (``ctc.py``), an im2col
kernel (``im2col.py``), cuDNN convolutions (``cudnn.py``) and GEMMs on cuBLAS handles of our own
(``gemm.py``). Importing it never imports CuPy: ``load_cupy`` does, when a transformer is made. See
docs/architecture.md, "The transformers".
"""

from .transformer import CupyTransformer, load_cupy

__all__ = ["CupyTransformer", "load_cupy"]
