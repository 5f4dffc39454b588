"""The backends by name: ``register_transformer`` (each backend package calls it), ``make_transformer``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..errors import BackendUnavailableError, NgraphError
from .base import Transformer

_REGISTRY: dict[str, Callable[..., Transformer]] = {}


def register_transformer(name: str, factory: Callable[..., Transformer]) -> None:
    """Make a backend available to ``make_transformer(backend=name)``."""
    _REGISTRY[name] = factory


def transformer_choices() -> list[str]:
    """The registered backend names."""
    return sorted(_REGISTRY)


def transformer_factory(name: str) -> Callable[..., Transformer]:
    """The registered factory of backend ``name`` (its ``Transformer`` class), without making a transformer.

    Returns:
        the factory ``register_transformer`` was given: for ``"numpy"`` and ``"cupy"``, the class, whose
        attributes (``kernel_overrides``, ``compiled_elementwise``) say what the backend runs its own way.

    Raises:
        NgraphError: an unknown backend name.

    Example:
        >>> transformer_factory("numpy").compiled_elementwise  # read, nothing is built
    """
    factory = _REGISTRY.get(name)
    if factory is None:
        raise NgraphError(f"transformer_factory: expected one of {transformer_choices()}, received {name!r}; "
                          "hint: a backend registers itself with register_transformer")
    return factory


def make_transformer(backend: str = "numpy", **options: Any) -> Transformer:
    """A transformer for ``backend``; use it as a context manager.

    Args:
        backend: a registered backend name (``"numpy"``, ``"cupy"``), or ``"auto"``: CuPy when a GPU
            is usable, else NumPy with a ``RuntimeWarning`` saying why (``device_arrays`` is then
            dropped: NumPy's results are host arrays anyway). Only ``"auto"`` falls back: asking for
            ``"cupy"`` where it cannot run raises.
        **options: backend options (``float_dtype="float64"``, ``seed=0``; CuPy: ``device_arrays=True``).

    Raises:
        NgraphError: an unknown backend name.
        BackendUnavailableError: a backend that cannot run here (CuPy without a GPU, no CuPy, an old driver).

    Example:
        >>> with make_transformer() as t:
        ...     f = t.computation(y, x)
    """
    if backend == "auto":
        try:
            return _REGISTRY["cupy"](**options)
        except BackendUnavailableError as exc:
            warnings.warn(f"make_transformer(backend='auto'): running on NumPy: {exc}", RuntimeWarning, stacklevel=2)
            options.pop("device_arrays", None)
            return _REGISTRY["numpy"](**options)
    factory = _REGISTRY.get(backend)
    if factory is None:
        raise NgraphError(f"make_transformer: unknown backend {backend!r}; expected 'auto' or one of "
                          f"{transformer_choices()}")
    return factory(**options)


