"""An ONNX backend (``onnx.backend.base.Backend``): the official backend test suite runs against us unchanged.

``prepare(model)`` checks and keeps the model; ``rep.run(inputs)`` imports it for the
inputs' shapes (dynamic dims take the inputs' lengths) and compiles it with the NumPy
transformer, caching one compiled graph per input signature. ONNX passes shapes, pads,
axes and indices as *inputs*; a converter that needs one of them at import time raises
``NeedStatic`` and the rep re-imports with that input's value baked in as a constant (the
cache key then includes the value).

Example:
    >>> from ngraph_core.frontends.onnx import backend
    >>> rep = backend.prepare(onnx.load("model.onnx"))
    >>> (y,) = rep.run([x])
    >>> import onnx.backend.test
    >>> suite = onnx.backend.test.BackendTest(backend, __name__)   # the official node tests
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep

from .context import NeedStatic
from .errors import OnnxError
from .importer import ImportedModel, build_model, load_model

MAX_RETRIES = 8  # re-imports for inputs found to be needed statically, one or more each time


def _tensor(name: str, value: Any) -> np.ndarray:
    """``value`` as an array, or ``OnnxError`` for a sequence or an absent optional (tensors only)."""
    if value is None or isinstance(value, (list, tuple)):
        kind = "an absent optional" if value is None else f"a sequence of {len(value)}"
        raise OnnxError(f"run: input {name!r} is {kind}; only tensor inputs are supported (sequences and "
                        "optionals are not)")
    return np.asarray(value)


class NgraphBackendRep(BackendRep):
    """A prepared model: compiles on first ``run`` for each input signature.

    Attributes:
        model: the ``ModelProto``.
        input_names: the graph inputs that are not initializers, in order.
    """

    def __init__(self, model: Any, initializers: str = "constants") -> None:
        self.model = model
        self.initializers = initializers
        init_names = {t.name for t in model.graph.initializer}
        self.input_names = [v.name for v in model.graph.input if v.name not in init_names]
        self.static_names: set[str] = set()
        self._cache: dict[Any, tuple[ImportedModel, Any]] = {}

    def _key(self, arrays: dict[str, np.ndarray]) -> tuple:
        return tuple((n, a.shape, a.dtype.str, a.tobytes() if n in self.static_names else b"")
                     for n, a in arrays.items())

    def _compiled(self, arrays: dict[str, np.ndarray]) -> tuple[ImportedModel, Any]:
        for _ in range(MAX_RETRIES):
            key = self._key(arrays)
            if key in self._cache:
                return self._cache[key]
            static = {n: arrays[n] for n in self.static_names}
            shapes = {n: a.shape for n, a in arrays.items()}
            try:
                imported = build_model(self.model, input_shapes=shapes, static_inputs=static,
                                       initializers=self.initializers)
            except NeedStatic as exc:
                unknown = set(exc.inputs) - set(arrays)
                if unknown or set(exc.inputs) <= self.static_names:
                    raise OnnxError(str(exc)) from None
                self.static_names |= set(exc.inputs)
                continue
            self._cache[key] = (imported, imported.computation())
            return self._cache[key]
        raise OnnxError(f"run: more than {MAX_RETRIES} re-imports for inputs needed at import time")

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The model's outputs for ``inputs`` (a list in input order, a dict by name, or one array).

        Raises:
            OnnxError: the wrong number of inputs or unknown names.
        """
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, (Sequence, Mapping)):
            inputs = [inputs]
        if isinstance(inputs, Mapping):
            arrays = {n: _tensor(n, inputs[n]) for n in self.input_names if n in inputs}
        else:
            if len(inputs) > len(self.input_names):
                raise OnnxError(f"run: expected at most {len(self.input_names)} inputs ({self.input_names}), "
                                f"received {len(inputs)}")
            arrays = {n: _tensor(n, v) for n, v in zip(self.input_names, inputs)}
        imported, fn = self._compiled(arrays)
        values = [arrays[n] for n in imported.input_names]
        result = fn(*values) if values or imported.outputs else ()
        outputs = result if isinstance(result, tuple) else (result,)
        return tuple(np.asarray(o) for o in outputs)


class NgraphBackend(Backend):
    """The ngraph backend for ``onnx.backend``: CPU (the NumPy transformer)."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> NgraphBackendRep:
        """A rep for ``model`` (a ``ModelProto``, path or bytes), checked now, compiled at first run.

        Raises:
            OnnxLoadError: not a readable, valid model.
            OnnxError: a device other than CPU.
        """
        if not cls.supports_device(device):
            raise OnnxError(f"prepare: expected device 'CPU', received {device!r}")
        return NgraphBackendRep(load_model(model), initializers=kwargs.get("initializers", "constants"))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Any = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one ``NodeProto`` on ``inputs`` (wrapped in a one-node model at the latest opset)."""
        from onnx import TensorProto, helper

        arrays = [np.asarray(v) for v in inputs]
        names = [n for n in node.input]
        ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for n, a in zip(names, arrays) if n]
        outs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in node.output]
        model = helper.make_model(helper.make_graph([node], "run_node", ins, outs))
        rep = NgraphBackendRep(model)
        return rep.run({n: a for n, a in zip(names, arrays) if n})

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


prepare = NgraphBackend.prepare
run_model = NgraphBackend.run_model
run_node = NgraphBackend.run_node
supports_device = NgraphBackend.supports_device
