"""A CPU stand-in for CuPy 14.2's API surface, to catch NumPy-only calls in shared kernels without a GPU.

``array-api-strict`` cannot run our kernels (they write into planned buffers with ``out=``,
which the array API standard lacks), so this module builds the equivalent checker from the
real CuPy API list recorded on the GPU machine (``data/cupy_api.json``, ``dir()`` of each
module): ``CupySurface`` is an ``xp`` that offers only names CuPy has and computes with NumPy;
``DeviceArray`` stands in for ``cupy.ndarray``. What it rejects, as CuPy would:

* a module name CuPy lacks (``xp.errstate``, ``xp.erf``): ``AttributeError``;
* an ndarray attribute ``cupy.ndarray`` lacks (``a.tofile`` is there, ``a.itemset`` is not);
* a host ``np.ndarray`` passed to a device function or operator: ``TypeError`` ("Unsupported type");
* a NumPy function called on a device array (``np.einsum(dev)``): ``TypeError`` naming ``xp.<name>``;
* reduction keywords CuPy's reductions lack (``where=``, ``initial=``), and ``ufunc.at`` on a
  ufunc CuPy cannot scatter with.

``CupySurfaceTransformer`` runs the shared kernels on it (``make_transformer("cupy_surface")``
after ``register()``).

Example:
    >>> xp = CupySurface()
    >>> a = xp.arange(6.0).reshape(2, 3)
    >>> type(xp.sum(a)).__name__, xp.sum(a).shape
    ('DeviceArray', ())
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np

from ngraph_core.errors import UnsupportedOpError
from ngraph_core.ir import OpType
from ngraph_core.passes.pipeline import PIPELINES
from ngraph_core.transformers.base import Transformer
from ngraph_core.transformers.kernels.fused import unblocked
from ngraph_core.transformers.registry import register_transformer

API = json.loads((pathlib.Path(__file__).parent / "data" / "cupy_api.json").read_text())["names"]
NDARRAY_NAMES = frozenset(API["ndarray"])
HOST_OK = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})  # CuPy copies host data in
# CuPy's reductions have no where=/initial= (numpy's do): a kernel passing them fails on the GPU
REDUCTION_KWARGS = {"where", "initial"}
REDUCTIONS = frozenset({"sum", "prod", "max", "min", "amax", "amin", "mean", "any", "all", "std", "var",
                        "nansum", "nanmax", "nanmin", "nanmean"})
# measured on CuPy 14.2 (H100, 2026-11-25): which ufuncs have .at and .reduce/.accumulate ("not supported yet"
# otherwise); subtract.at takes int32/uint32 only; a ufunc call rejects where=
SCATTER_UFUNCS = frozenset({"add", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "subtract"})
REDUCE_UFUNCS = frozenset({"add", "multiply"})
_DATA_ATTRS = frozenset({"shape", "dtype", "ndim", "size", "strides", "itemsize", "nbytes", "flags"})
_MISSING = object()
_DEPTH = [0]  # > 0 while a namespace call, method or operator is running on unwrapped arrays
HOST_READS = [0]
"""Device values read by the host (``get``, ``item``, ``tolist``, ``bool``/``float``/``int`` of an array,
``asnumpy``): each is a device-to-host copy and a synchronisation on a GPU. The transformer's own
result conversion (``to_numpy``) is not counted: that is the computation's boundary."""
_HOST_READ_METHODS = frozenset({"get", "item", "tolist"})
CAPTURE: list[list[Any] | None] = [None]
"""A list while a stand-in CUDA stream captures (``fake_cuda.py``): each device call and operator appends its
replay, a function that runs it again and writes its result into the arrays it returned the first time (as a
CUDA graph replays a kernel into the addresses it recorded)."""


def _plain(a: Any) -> Any:
    """A DeviceArray as a plain ndarray view (same memory); lists/tuples/dicts element by element."""
    if isinstance(a, DeviceArray):
        return np.ndarray.view(a, np.ndarray)
    if isinstance(a, (list, tuple)):
        return type(a)(_plain(x) for x in a)
    if isinstance(a, dict):
        return {k: _plain(v) for k, v in a.items()}
    return a


def _device(a: Any) -> Any:
    """NumPy results as device arrays: arrays as DeviceArray views, NumPy scalars as 0-d DeviceArrays."""
    if isinstance(a, DeviceArray):
        return a
    if isinstance(a, np.ndarray):
        return np.ndarray.view(a, DeviceArray)
    if isinstance(a, np.generic):
        return np.ndarray.view(np.asarray(a), DeviceArray)
    if isinstance(a, tuple):
        return tuple(_device(x) for x in a)
    if isinstance(a, list):
        return [_device(x) for x in a]
    return a


def _reject_host(where: str, values: Any) -> None:
    """CuPy's TypeError for a host array reaching a device function."""
    for v in values:
        if isinstance(v, np.ndarray) and not isinstance(v, DeviceArray):
            raise TypeError(f"Unsupported type {type(v)} (CuPy-surface check: {where} got a host numpy array; "
                            "hint: move it to the device with xp.asarray first)")
        if isinstance(v, (list, tuple)):
            _reject_host(where, v)


def device_call(where: str, fn: Any, args: tuple, kwargs: dict, host_ok: bool = False) -> Any:
    """``fn`` on the unwrapped arguments, results wrapped; an ``out=`` array comes back as itself."""
    if not host_ok:
        _reject_host(where, args)
        _reject_host(where, kwargs.values())
    _DEPTH[0] += 1
    try:
        with np.errstate(all="ignore"):  # CuPy never warns about overflow or invalid values
            result = fn(*_plain(args), **_plain(kwargs))
    finally:
        _DEPTH[0] -= 1
    out = kwargs.get("out")
    if isinstance(out, DeviceArray) and isinstance(result, np.ndarray):  # NumPy returns out itself
        result = out
    result = _device(result)
    if CAPTURE[0] is not None:
        CAPTURE[0].append(lambda: _write_back(result, _again(fn, _plain(args), _plain(kwargs))))
    return result


def _again(fn: Any, args: tuple, kwargs: dict) -> Any:
    with np.errstate(all="ignore"):
        return fn(*args, **kwargs)


def _write_back(recorded: Any, again: Any) -> None:
    """Copy a replayed call's result ``again`` into the arrays it returned when recorded (tuples element-wise)."""
    if isinstance(recorded, (tuple, list)) and isinstance(again, (tuple, list)):
        for r, a in zip(recorded, again):
            _write_back(r, a)
    elif isinstance(recorded, np.ndarray) and isinstance(again, (np.ndarray, np.generic)):
        target = np.ndarray.view(recorded, np.ndarray)
        if target.shape == np.shape(again) and target.flags.writeable:
            np.copyto(target, again, casting="unsafe")


def _check_min_out(where: str, name: str, kwargs: dict) -> None:
    """CuPy 14.2's ``min``/``amin``/``ndarray.min`` with ``out=`` raise TypeError in the CUB reduction
    path (measured on an H100, 2026-11-25; ``max``, ``sum``, ``prod``, ``argmin`` take ``out=``)."""
    if name in ("min", "amin") and kwargs.get("out") is not None:
        raise TypeError(f"{where}(out=...) fails on CuPy 14.2 (its CUB reduction compares out with a dtype; "
                        "CuPy-surface check); hint: reduce into a temporary and xp.copyto it")


class DeviceArray(np.ndarray):
    """A NumPy array posing as ``cupy.ndarray``: only CuPy's attributes, no NumPy functions on it.

    Operators and indexing work (as on CuPy) and give DeviceArrays; ``get()`` copies to the host.
    """

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_"):
            return super().__getattribute__(name)
        if name not in NDARRAY_NAMES:
            raise AttributeError(f"cupy.ndarray has no attribute {name!r} (CuPy-surface check)")
        if name in _DATA_ATTRS:
            return super().__getattribute__(name)
        if name in _HOST_READ_METHODS:
            HOST_READS[0] += 1
        if name == "get":
            return lambda stream=None, out=None, order="C", blocking=True: np.array(_plain(self), order=order)
        if name == "set":
            return lambda arr, stream=None: np.copyto(_plain(self), arr)
        value = getattr(np.ndarray.view(self, np.ndarray), name, _MISSING)
        if value is _MISSING:
            raise AttributeError(f"cupy.ndarray.{name} is not emulated by the CuPy-surface checker")
        if callable(value):
            def method(*args: Any, **kwargs: Any) -> Any:
                _check_min_out(f"ndarray.{name}", name, kwargs)
                return device_call(f"ndarray.{name}", value, args, kwargs)

            return method
        return _device(value) if isinstance(value, np.ndarray) else value

    def __bool__(self) -> bool:
        HOST_READS[0] += 1
        return bool(np.ndarray.view(self, np.ndarray))

    def __float__(self) -> float:
        HOST_READS[0] += 1
        return float(np.ndarray.view(self, np.ndarray))

    def __int__(self) -> int:
        HOST_READS[0] += 1
        return int(np.ndarray.view(self, np.ndarray))

    def __index__(self) -> int:
        HOST_READS[0] += 1
        return np.ndarray.view(self, np.ndarray).__index__()

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if _DEPTH[0] == 0:
            raise TypeError(f"numpy.{ufunc.__name__} got a device array (CuPy-surface check); "
                            f"hint: use xp.{ufunc.__name__} in kernels, never np.{ufunc.__name__}")
        return _device(getattr(ufunc, method)(*_plain(inputs), **_plain(kwargs)))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if _DEPTH[0] == 0:
            raise TypeError(f"numpy.{func.__name__} got a device array (CuPy-surface check); "
                            f"hint: use xp.{func.__name__} in kernels, never np.{func.__name__}")
        return _device(func(*_plain(args), **_plain(kwargs)))


def _operator(name: str) -> Any:
    base = getattr(np.ndarray, name)

    def op(self: DeviceArray, *args: Any) -> Any:
        if name == "__setitem__":  # CuPy takes host index arrays, not a host value (measured: ValueError)
            _reject_host(f"operator {name} (the value)", args[1:])
        elif name != "__getitem__":
            _reject_host(f"operator {name}", args)
        _DEPTH[0] += 1
        try:
            plain_self = np.ndarray.view(self, np.ndarray)
            with np.errstate(all="ignore"):
                result = base(plain_self, *_plain(args))
        finally:
            _DEPTH[0] -= 1
        result = self if result is plain_self else _device(result)
        if CAPTURE[0] is not None and name not in ("__repr__", "__str__"):
            CAPTURE[0].append(lambda: _write_back(result, _again(base, (np.ndarray.view(self, np.ndarray),
                                                                        *_plain(args)), {})))
        return result

    op.__name__ = name
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
              "lshift", "rshift"):
    for _form in ("__{}__", "__r{}__", "__i{}__"):
        setattr(DeviceArray, _form.format(_name), _operator(_form.format(_name)))
for _name in ("__neg__", "__pos__", "__abs__", "__invert__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
              "__ge__", "__getitem__", "__setitem__", "__divmod__", "__repr__", "__str__"):
    setattr(DeviceArray, _name, _operator(_name))


class Ufunc:
    """A NumPy ufunc exposed as a CuPy ufunc: call, reduce, accumulate, outer, reduceat, at."""

    def __init__(self, fn: np.ufunc) -> None:
        self._fn = fn
        self.__name__ = fn.__name__
        self.nin, self.nout, self.nargs = fn.nin, fn.nout, fn.nargs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "where" in kwargs:
            raise TypeError(f"cupy.{self.__name__}: Wrong arguments {{'where': ...}} (CuPy's ufuncs take no where=; "
                            "CuPy-surface check); hint: compute everywhere, then xp.where or xp.copyto(where=)")
        return device_call(self.__name__, self._fn, args, kwargs)

    def __getattr__(self, method: str) -> Any:
        if method not in ("reduce", "accumulate", "outer", "reduceat", "at"):
            raise AttributeError(f"cupy.ufunc has no attribute {method!r} (CuPy-surface check)")
        if method in ("reduce", "accumulate", "reduceat") and self.__name__ not in REDUCE_UFUNCS:
            raise AttributeError(f"cupy.{self.__name__}.{method} raises NotImplementedError on CuPy 14.2 "
                                 "(CuPy-surface check); hint: use xp.min / xp.max / xp.any, or add / multiply")
        if method == "at" and self.__name__ not in SCATTER_UFUNCS:
            raise AttributeError(f"cupy.{self.__name__}.at is not supported by CuPy (CuPy-surface check); "
                                 f"hint: CuPy scatters only with {sorted(SCATTER_UFUNCS)}")
        fn, where = getattr(self._fn, method), f"{self.__name__}.{method}"

        def call(*args: Any, **kwargs: Any) -> Any:
            narrow = ("int32", "uint32")
            if method == "at" and self.__name__ == "subtract" and args and args[0].dtype.name not in narrow:
                raise TypeError(f"cupy.subtract.at only supports int32, uint32 (received {args[0].dtype}; "
                                "CuPy-surface check); hint: add.at the negated updates")
            return device_call(where, fn, args, kwargs)

        return call


class Namespace:
    """A module of CuPy's surface: names in ``allowed`` looked up on ``backing`` and wrapped."""

    def __init__(self, module: str, allowed: list[str], backing: Any, extra: dict[str, Any] | None = None) -> None:
        self.__name__ = module
        self._allowed = frozenset(allowed)
        self._backing = backing
        self._extra = extra or {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name not in self._allowed:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (CuPy-surface check)")
        if name in self._extra:
            return self._extra[name]
        value = getattr(self._backing, name, _MISSING)
        if value is _MISSING:
            raise AttributeError(f"{self.__name__}.{name} is not emulated by the CuPy-surface checker")
        if isinstance(value, np.ufunc):
            return Ufunc(value)
        if isinstance(value, type) or not callable(value):  # dtypes, constants, exception classes
            return value
        return self._function(name, value)

    def _function(self, name: str, fn: Any) -> Any:
        where = f"{self.__name__}.{name}"

        def call(*args: Any, **kwargs: Any) -> Any:
            if name in REDUCTIONS and REDUCTION_KWARGS & set(kwargs):
                raise TypeError(f"{where}() got unexpected keyword(s) {sorted(REDUCTION_KWARGS & set(kwargs))} "
                                "(CuPy-surface check: CuPy's reductions have no where=/initial=)")
            _check_min_out(where, name, kwargs)
            return device_call(where, fn, args, kwargs)

        call.__name__ = name
        return call


class Generator:
    """``cupy.random.Generator``'s methods only (``data/cupy_api.json``), drawn by NumPy's generator."""

    def __init__(self, seed: Any = None) -> None:
        self._gen = np.random.default_rng(seed)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in API["Generator"]:
            raise AttributeError(f"cupy.random.Generator has no attribute {name!r} (CuPy-surface check)")
        if name == "random":
            return self._random
        fn, where = getattr(self._gen, name), f"cupy.random.Generator.{name}"
        if name in _NUMPY_DTYPE_DRAWS:
            return lambda *args, **kwargs: device_call(where, fn, args, kwargs)

        def draw(*args: Any, dtype: Any = None, **kwargs: Any) -> Any:  # CuPy's uniform etc. take dtype=
            result = device_call(where, fn, args, kwargs)
            return result if dtype is None else result.astype(dtype)

        return draw

    def _random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        """CuPy 14.2's ``random``: with ``out=`` and no ``size=`` it fills ``out`` with ONE value
        (measured on an H100, 2026-11-25), so a kernel must pass ``size=out.shape``."""
        if out is not None and size is None:
            out.fill(self._gen.random(dtype=dtype))
            return out
        return device_call("cupy.random.Generator.random", self._gen.random, (size, dtype, out), {})


_NUMPY_DTYPE_DRAWS = frozenset({"standard_normal", "standard_exponential", "standard_gamma", "integers"})


def _asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
    HOST_READS[0] += 1
    return np.array(_plain(a), order=order)


class CupySurface(Namespace):
    """The ``xp`` of the checker: CuPy 14.2's module names, NumPy's arithmetic, device arrays.

    ``xp.asarray(device_array)`` with no dtype change returns the same object, as CuPy does.
    """

    def __init__(self) -> None:
        stride_tricks = Namespace("cupy.lib.stride_tricks", API["stride_tricks"], np.lib.stride_tricks)
        random = Namespace("cupy.random", API["random"], np.random, {"default_rng": Generator,
                                                                     "Generator": Generator})
        super().__init__("cupy", API["cupy"], np, {
            "ndarray": DeviceArray,
            "lib": Namespace("cupy.lib", ["stride_tricks"], None, {"stride_tricks": stride_tricks}),
            "linalg": Namespace("cupy.linalg", API["linalg"], np.linalg),
            "fft": Namespace("cupy.fft", API["fft"], np.fft),
            "random": random,
            "asnumpy": _asnumpy,
            "get_array_module": lambda *args: self,
        })

    def _function(self, name: str, fn: Any) -> Any:
        if name not in HOST_OK:
            return super()._function(name, fn)

        def convert(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
            if name == "asarray" and isinstance(a, DeviceArray) and not args and not kwargs \
                    and (dtype is None or np.dtype(dtype) == a.dtype):
                return a
            return device_call(f"cupy.{name}", fn, (a, dtype, *args), kwargs, host_ok=True)

        return convert


class CupySurfaceTransformer(Transformer):
    """The CuPy transformer's plans on the CuPy-surface checker (CPU): kernels see only CuPy's API."""

    name = "cupy_surface"
    kernel_overrides = {OpType.FUSED: unblocked}  # as CupyTransformer: whole-array fused programs

    def __init__(self, **options: Any) -> None:
        self.xp = CupySurface()
        super().__init__(**options)

    def to_numpy(self, value: Any) -> np.ndarray:
        # a copy, as cupy's .get() is: a result never aliases device memory
        return np.array(_plain(value)) if isinstance(value, DeviceArray) else np.asarray(value)

    def _generator_state(self, gen: Any) -> Any:
        raise UnsupportedOpError(
            "cupy_surface transformer: random_state is not supported (CuPy's device generators expose no state); "
            "hint: resume on the numpy backend for bit-exact random streams"
        )


def register() -> str:
    """Make ``make_transformer("cupy_surface")`` available (idempotent); returns the backend name.

    The backend compiles with the CuPy transformer's pass lists (``passes.pipeline.PIPELINES["cupy"]``),
    so it runs exactly the plans the GPU runs.
    """
    PIPELINES.setdefault(CupySurfaceTransformer.name, PIPELINES["cupy"])
    register_transformer(CupySurfaceTransformer.name, CupySurfaceTransformer)
    return CupySurfaceTransformer.name
