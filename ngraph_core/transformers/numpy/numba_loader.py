"""Whether compiled (numba) kernels run (``NG_KERNELS``), and how a generated kernel's source is loaded.

Every module that generates numba source (``numba_kernels``, ``narrow_gemm``, ``compiled_pool``,
``compiled_scan``, ``winograd``) loads it with ``load_kernel``, which writes it once under the kernel
cache (``kernel_cache.kernel_dir``) and imports it; ``kernel_set``/``reference_only`` say which
kernels the user asked for.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from .kernel_cache import kernel_dir

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
"""numba is optional (the ``fast`` extra); it is imported by the generated modules only, when first needed."""

FLOAT_DTYPES = ("float32", "float64")

_functions: dict[str, Callable[..., Any]] = {}  # canonical text -> the compiled (lazily) numba dispatcher


def load_kernel(source: str) -> Callable[..., Any]:
    """The numba dispatcher ``k`` of ``source``, written once under ``kernel_dir()`` (the cache when it is
    private, else a private temporary directory) and imported."""
    fn = _functions.get(source)
    if fn is not None:
        return fn
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    directory = kernel_dir()
    path = directory / f"k_{digest}.py"
    if not path.exists() or path.read_text() != source:
        # atomically, and only when missing: numba's on-disk index is keyed by the file's mtime
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    name = f"_ngraph_kernel_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cache locates a function by its module
    spec.loader.exec_module(module)
    fn = _functions[source] = module.k
    return fn


KERNEL_SETS = ("auto", "numba", "numpy")


def kernel_set() -> str:
    """``NG_KERNELS``: ``auto`` (default: compiled pooling and Winograd, fused programs compiled from
    ``numba_kernels.COMPILED_MIN_ELEMENTS``), ``numba`` (every fused program numba supports compiled) or ``numpy``
    (the NumPy reference kernels only). Read when a kernel is made.

    Raises:
        ValueError: another value.
    """
    value = os.environ.get("NG_KERNELS", "").strip().lower() or "auto"
    if value not in KERNEL_SETS:
        raise ValueError(f"NG_KERNELS={value!r}: expected one of {', '.join(KERNEL_SETS)}; "
                         "hint: unset it for auto")
    return value


def reference_only() -> bool:
    """True when ``NG_KERNELS=numpy`` asks for the NumPy reference kernels only: no compiled pooling or
    fused programs, no Winograd convolutions."""
    return kernel_set() == "numpy"
