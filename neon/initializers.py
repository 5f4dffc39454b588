"""Weight initializers: ``fill(shape) -> float32 array`` (the only NumPy math in neon).

An initializer produces a variable's *initial value*; it builds no ops. Layers hand
it to ``Layer.add_variable``, which fills the variable once, when it is created.

Fan convention (neon's layout puts the output axis first): for a weight of shape
``(fan_out, *rest)``, ``fan_out = shape[0]`` and ``fan_in = prod(shape[1:])``; a
1-D shape has ``fan_in = fan_out = shape[0]``. A convolution filter is filled through
``fill_filter(shape, receptive_field)`` with its output channels first, ``(K, Ci, *window)``:
``fan_in = Ci * prod(window)`` as above, and ``fan_out = K * prod(window)`` (each input pixel
reaches that many outputs; PyTorch's and Keras' rule), where the plain rule would give ``K``.

Reproducibility: every random initializer takes ``seed=None``. With a seed it draws from
its own generator (created once, so two variables filled by one instance still differ);
without one it draws from this module's generator, reset by ``set_seed(seed)`` (seeded
with 0 at import), so a program that builds its layers in the same order gets the same
weights every run.

Shapes only: inside ``shapes_only()``, ``fill`` and ``fill_filter`` of every initializer (a
user's subclass too) return a read-write view of one zero with zero strides, so a model can be
built to read its variables' shapes without allocating them; ``neon.load_model`` builds a
checkpoint's layers so, before its weights replace every value.

Example:
    >>> from neon.initializers import GlorotUniform, set_seed
    >>> set_seed(1)
    >>> GlorotUniform().fill((4, 3)).shape
    (4, 3)
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import ngraph_core as ng

from .registry import lookup

_generator = np.random.default_rng(0)
_shapes_only: contextvars.ContextVar[bool] = contextvars.ContextVar("neon_initializers_shapes_only", default=False)
MAX_VIEW_ELEMENTS = 2**62  # a shape-only view's elements: numpy's index type holds them


class InitializerError(ng.NgraphError, ValueError):
    """An initializer was configured with values it cannot use."""


def set_seed(seed: int) -> None:
    """Reset the generator shared by initializers that have no seed of their own.

    Example:
        >>> set_seed(0)
    """
    global _generator
    _generator = np.random.default_rng(seed)


@contextmanager
def shapes_only() -> Iterator[None]:
    """Inside, every initializer's ``fill``/``fill_filter`` returns a zero-stride view of one zero (no memory).

    The values are all 0 and alias one element: only their shapes mean anything. Layers built
    inside also give their variables no initial arrays (``Layer.add_variable``).

    Example:
        >>> with shapes_only():
        ...     GlorotUniform().fill((2**20, 2**20)).strides
        (0, 0)
    """
    token = _shapes_only.set(True)
    try:
        yield
    finally:
        _shapes_only.reset(token)


def filling_shapes_only() -> bool:
    """True inside ``shapes_only()``."""
    return _shapes_only.get()


def _zero_view(shape: tuple[int, ...], who: str) -> np.ndarray:
    """A writable float32 view of ``shape`` over one zero (every element aliases it)."""
    dims = tuple(shape)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in dims) or \
            math.prod(int(n) for n in dims) > MAX_VIEW_ELEMENTS:
        raise InitializerError(f"{who}: expected a shape of sizes >= 0 with at most {MAX_VIEW_ELEMENTS} elements, "
                               f"received {str(dims)[:120]}; hint: the layer's sizes are far too large")
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), tuple(int(n) for n in dims), (0,) * len(dims))


def _unless_shapes_only(method: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``method`` (a ``fill`` or ``fill_filter``), or a zero view of the shape inside ``shapes_only()``."""
    @functools.wraps(method)
    def fill(self: Initializer, shape: tuple[int, ...], *args: Any, **kwargs: Any) -> np.ndarray:
        if _shapes_only.get():
            return _zero_view(shape, f"{type(self).__name__}.{method.__name__}")
        return method(self, shape, *args, **kwargs)
    return fill


def compute_fans(shape: tuple[int, ...], receptive_field: int = 1) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight shape (output axis first; see the module docstring).

    Args:
        shape: the weight's shape, output axis first.
        receptive_field: for a convolution filter ``(K, Ci, *window)``, ``prod(window)``: it
            multiplies ``fan_out`` (``fan_in`` already counts the window).

    Example:
        >>> compute_fans((10, 784)), compute_fans((64, 3, 3, 3), receptive_field=9)
        ((784, 10), (27, 576))
    """
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    return int(np.prod(shape[1:])), int(shape[0]) * int(receptive_field)


class Initializer:
    """Base of the initializers: ``fill(shape)`` returns a float32 array of that shape.

    Args:
        seed: seeds this initializer's own generator; None draws from the module's.
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise InitializerError(f"{type(self).__name__}: seed must be an int or None, received {seed!r}")
        self.seed = None if seed is None else int(seed)
        self._own = None if seed is None else np.random.default_rng(self.seed)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # every subclass's own fill methods honour shapes_only(), a user's initializer too
        super().__init_subclass__(**kwargs)
        for name in ("fill", "fill_filter"):
            if name in cls.__dict__:
                setattr(cls, name, _unless_shapes_only(cls.__dict__[name]))

    @property
    def rng(self) -> np.random.Generator:
        """The generator this initializer draws from."""
        return self._own if self._own is not None else _generator

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        """A float32 array of ``shape`` holding initial values."""
        raise NotImplementedError(f"{type(self).__name__} must implement fill(shape)")

    def fill_filter(self, shape: tuple[int, ...], receptive_field: int) -> np.ndarray:
        """A convolution filter, output channels first: ``(K, Ci, *window)`` with ``receptive_field =
        prod(window)`` (see the module docstring). Only initializers that use ``fan_out`` differ from ``fill``.

        Example:
            >>> w = GlorotUniform(seed=0).fill_filter((16, 3, 3, 3), receptive_field=9)
        """
        return self.fill(shape)

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain data."""
        return {"seed": self.seed}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Initializer:
        """A new initializer from ``get_config()``'s output."""
        return cls(**config)

    def __call__(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.fill(shape)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _finite(cls_name: str, **values: float) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
            raise InitializerError(f"{cls_name}: {key} must be a finite number, received {value!r}")


class Constant(Initializer):
    """Every element ``val``.

    Example:
        >>> Constant(0.5).fill((2,))
        array([0.5, 0.5], dtype=float32)
    """

    def __init__(self, val: float = 0.0) -> None:
        super().__init__(None)
        _finite("Constant", val=val)
        self.val = float(val)

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.full(shape, self.val, dtype=np.float32)

    def get_config(self) -> dict[str, Any]:
        return {"val": self.val}


class Uniform(Initializer):
    """Uniform samples in ``[low, high)``.

    Example:
        >>> w = Uniform(-0.1, 0.1, seed=0).fill((3, 2))
    """

    def __init__(self, low: float = -0.1, high: float = 0.1, seed: int | None = None) -> None:
        super().__init__(seed)
        _finite("Uniform", low=low, high=high)
        if not low < high:
            raise InitializerError(f"Uniform: expected low < high, received low={low}, high={high}")
        self.low, self.high = float(low), float(high)

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.uniform(self.low, self.high, shape).astype(np.float32)

    def get_config(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "seed": self.seed}


class Gaussian(Initializer):
    """Normal samples with mean ``loc`` and standard deviation ``scale``.

    Example:
        >>> w = Gaussian(0.0, 0.01, seed=0).fill((3, 2))
    """

    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int | None = None) -> None:
        super().__init__(seed)
        _finite("Gaussian", loc=loc, scale=scale)
        if scale < 0:
            raise InitializerError(f"Gaussian: expected scale >= 0, received {scale}")
        self.loc, self.scale = float(loc), float(scale)

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.normal(self.loc, self.scale, shape).astype(np.float32)

    def get_config(self) -> dict[str, Any]:
        return {"loc": self.loc, "scale": self.scale, "seed": self.seed}


class GlorotUniform(Initializer):
    """Uniform in ``±sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio 2010).

    Example:
        >>> w = GlorotUniform(seed=0).fill((10, 784))
    """

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.fill_filter(shape, 1)

    def fill_filter(self, shape: tuple[int, ...], receptive_field: int) -> np.ndarray:
        fan_in, fan_out = compute_fans(shape, receptive_field)
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        return self.rng.uniform(-bound, bound, shape).astype(np.float32)


class Xavier(Initializer):
    """neon's Xavier: uniform in ``±sqrt(3 / fan_in)`` (variance 1 / fan_in).

    Example:
        >>> w = Xavier(seed=0).fill((10, 784))
    """

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        fan_in, _ = compute_fans(shape)
        bound = math.sqrt(3.0 / fan_in)
        return self.rng.uniform(-bound, bound, shape).astype(np.float32)


class Kaiming(Initializer):
    """Normal with mean 0 and standard deviation ``sqrt(2 / fan_in)`` (He et al. 2015; for ReLU).

    Example:
        >>> w = Kaiming(seed=0).fill((64, 3, 3, 3))
    """

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        fan_in, _ = compute_fans(shape)
        return self.rng.normal(0.0, math.sqrt(2.0 / fan_in), shape).astype(np.float32)


class Orthonormal(Initializer):
    """``scale`` times a random orthonormal matrix (Saxe et al. 2014), as neon does it.

    The weight is viewed as a ``(shape[0], prod(shape[1:]))`` matrix; its rows are
    orthonormal when ``shape[0] <= prod(shape[1:])``, its columns otherwise.

    Example:
        >>> w = Orthonormal(scale=1.0, seed=0).fill((4, 8))  # w @ w.T == I
    """

    def __init__(self, scale: float = 1.1, seed: int | None = None) -> None:
        super().__init__(seed)
        _finite("Orthonormal", scale=scale)
        self.scale = float(scale)

    def fill(self, shape: tuple[int, ...]) -> np.ndarray:
        if len(shape) == 0:
            return np.asarray(self.scale, dtype=np.float32)
        flat = (shape[0], int(np.prod(shape[1:])))
        a = self.rng.normal(0.0, 1.0, flat)
        u, _, v = np.linalg.svd(a, full_matrices=False)
        q = u if u.shape == flat else v
        return (self.scale * q).reshape(shape).astype(np.float32)

    def get_config(self) -> dict[str, Any]:
        return {"scale": self.scale, "seed": self.seed}


_ALIASES = {
    "constant": Constant, "zeros": Constant, "uniform": Uniform, "gaussian": Gaussian, "normal": Gaussian,
    "glorot_uniform": GlorotUniform, "glorotuniform": GlorotUniform, "xavier": Xavier, "kaiming": Kaiming,
    "he_normal": Kaiming, "orthonormal": Orthonormal, "orthogonal": Orthonormal,
}


def serialize(init: Initializer) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` for ``init`` (plain data; ``get`` reverses it)."""
    return {"class_name": type(init).__name__, "config": init.get_config()}


def get(identifier: Any, where: str = "initializer") -> Initializer:
    """An initializer from an instance, a number (``Constant``), a name (``"glorot_uniform"``,
    ``"Kaiming"``) or a ``serialize`` dict.

    Raises:
        InitializerError: anything else, or an unknown name.

    Example:
        >>> get("xavier"), get(0.0), get({"class_name": "Uniform", "config": {"low": -1, "high": 1}})
    """
    if isinstance(identifier, (int, float, np.number)) and not isinstance(identifier, bool):
        return Constant(float(identifier))
    return lookup(identifier, Initializer, _ALIASES, InitializerError, where, "initializer",
                  "an Initializer, a number, a name or a config dict (e.g. neon.initializers.GlorotUniform())")


__all__ = [
    "Initializer", "InitializerError", "Constant", "Uniform", "Gaussian", "GlorotUniform", "Xavier", "Kaiming",
    "Orthonormal", "compute_fans", "filling_shapes_only", "set_seed", "serialize", "get", "shapes_only",
]
