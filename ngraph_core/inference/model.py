"""``CompiledModel``: a frozen, planned inference graph and its stored weights; ``Executor`` runs it.

A ``CompiledModel`` is immutable after compilation (``compile.py`` makes one, ``deploy.load``
reads one back). Running it needs an ``Executor`` (``new_executor()``): its own transformer,
compiled plan and arena, so two executors can run at the same time in two threads (NumPy
releases the GIL in BLAS and most kernels). ``CompiledModel.infer`` uses one default executor
behind a lock; a request pool makes one executor per request.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import api
from ..ir import Axes, Op
from ..passes import MemoryReport
from ..transformers import make_transformer
from .freeze import InferenceError, substitute_all
from .quantize import QuantizedWeight

__all__ = ["CompiledModel", "Executor", "TensorSpec", "rows_to_input", "split_item"]


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a compiled model.

    Attributes:
        name: the op's name (inputs are fed by it in a dict).
        axes: its axes; the batch axis ``N`` has the compiled batch size.
        dtype: its NumPy dtype name.
    """

    name: str
    axes: Axes
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        return self.axes.lengths

    @property
    def batch_index(self) -> int | None:
        """Position of the batch axis ``N``, or None."""
        batch = self.axes.batch_axis
        return None if batch is None else self.axes.index(batch)


def _spec(op: Op) -> TensorSpec:
    return TensorSpec(op.name, op.axes, op.dtype)


class Executor:
    """One independent runner of a ``CompiledModel``: its own transformer, plan and arena.

    Args:
        model: the compiled model.
        **transformer_options: passed to ``make_transformer`` (e.g. ``profile=True``).

    Attributes:
        transformer: the transformer it owns.
        computation: the compiled plan (``computation.source`` shows it).

    Example:
        >>> run = compiled.new_executor()
        >>> (probs,) = run(x_batch)
    """

    def __init__(self, model: CompiledModel, **transformer_options: Any) -> None:
        self.model = model
        self.transformer = make_transformer(model.backend, **transformer_options)
        self.computation = self.transformer.computation(list(model.graph_outputs), *model.graph_inputs,
                                                        mode="inference")

    def __call__(self, *arrays: Any, **named: Any) -> list[np.ndarray]:
        """Run one batch: arrays positionally (in ``model.inputs`` order), a dict, or by name.

        Returns:
            one NumPy array per output, in ``model.outputs`` order.

        Raises:
            InferenceError: missing, extra or misshapen inputs.
        """
        values = self.model.order_inputs(arrays, named)
        out = self.computation(*values)
        return [np.asarray(o) for o in out]

    def memory_report(self) -> MemoryReport:
        """The plan's arena, no-reuse and workspace bytes (``Computation.memory_report``)."""
        return self.computation.memory_report()

    def close(self) -> None:
        """Release the transformer."""
        self.transformer.close()


class CompiledModel:
    """A graph ready to serve: weights frozen (and maybe quantized), batch norm folded, memory planned.

    Made by ``compile_for_inference`` or ``load``. NumPy has no INT8 or FP16 matrix multiply,
    so quantized weights are stored (and saved) in their small dtype and computed in float32
    after dequantization: the file is 2x/4x smaller and the accuracy effect is the real one,
    the speed is that of float32.

    Args:
        inputs: the graph's placeholders, in feeding order.
        outputs: the template graph's results (weights as slot variables).
        weights: slot variable -> its ``QuantizedWeight``.
        precision, batch_size, backend, accuracy_drop: as the attributes below.
        activation_scales: INT8 data operands -> their quantization step (informational).

    Attributes:
        inputs: ``TensorSpec`` of each input, in feeding order.
        outputs: ``TensorSpec`` of each output.
        precision: ``"fp32"``, ``"fp16"`` or ``"int8"``.
        batch_size: the batch length the graph was compiled for.
        backend: the transformer backend it runs on.
        accuracy_drop: fp32 accuracy minus this model's (fractions, e.g. 0.004), measured on
            labelled calibration or validation data; None for fp32 or without labelled data.
        weights: weight slot (a variable of the template graph) -> its stored value.
        activation_scales: for INT8, the data operand -> its calibrated quantization step.
        graph_inputs, graph_outputs: the executable graph (placeholders, and results over constants).
        template_outputs: the graph with weight slots as variables (what ``save`` writes).

    Example:
        >>> compiled = compile_for_inference(model, precision="fp16")
        >>> (probs,) = compiled.infer(x_batch)
    """

    def __init__(self, inputs: Sequence[Op], outputs: Sequence[Op], weights: Mapping[Op, QuantizedWeight],
                 precision: str = "fp32", batch_size: int = 1, backend: str = "numpy",
                 activation_scales: Mapping[Op, float] | None = None, accuracy_drop: float | None = None) -> None:
        self.graph_inputs: tuple[Op, ...] = tuple(inputs)
        self.template_outputs: tuple[Op, ...] = tuple(outputs)
        self.weights: dict[Op, QuantizedWeight] = dict(weights)
        self.precision = precision
        self.batch_size = int(batch_size)
        self.backend = backend
        self.activation_scales: dict[Op, float] = dict(activation_scales or {})
        self.accuracy_drop = accuracy_drop
        self._constants = {slot: api.constant(w.dequantize(), slot.axes, dtype=slot.dtype, name=slot.meta.name)
                           for slot, w in self.weights.items()}
        self.graph_outputs: tuple[Op, ...] = tuple(self.executable(self.template_outputs))
        self.inputs = [_spec(p) for p in self.graph_inputs]
        self.outputs = [_spec(o) for o in self.template_outputs]
        self._executor: Executor | None = None
        self._lock = threading.Lock()

    def executable(self, roots: Sequence[Op]) -> list[Op]:
        """``roots`` of the template graph with every weight slot replaced by a constant of its
        (dequantized) value: what a transformer compiles."""
        return substitute_all(roots, self._constants)

    # -- running -------------------------------------------------------------------------------------
    def new_executor(self, **transformer_options: Any) -> Executor:
        """An independent runner (own transformer and arena), safe to use beside others in other threads.

        Args:
            **transformer_options: passed to ``make_transformer`` (``profile=True``...).

        Returns:
            an ``Executor``.

        Example:
            >>> runners = [compiled.new_executor() for _ in range(4)]
        """
        return Executor(self, **transformer_options)

    def infer(self, *arrays: Any, **named: Any) -> list[np.ndarray]:
        """Run one batch synchronously on the default executor (serialized by a lock).

        Args:
            *arrays: one array per input, in ``inputs`` order and in each input's axes order
                (batch axis included, of length ``batch_size``); or one dict ``{name: array}``.
            **named: inputs by name.

        Returns:
            one NumPy array per output.

        Raises:
            InferenceError: missing, extra or misshapen inputs.

        Example:
            >>> (probs,) = compiled.infer(x_batch)           # x_batch: [784, N]
            >>> (probs,) = compiled.infer({"X": x_batch})
        """
        with self._lock:
            if self._executor is None:
                self._executor = self.new_executor()
            return self._executor(*arrays, **named)

    def order_inputs(self, arrays: Sequence[Any], named: Mapping[str, Any]) -> list[np.ndarray]:
        """The fed values in ``inputs`` order, checked against each input's shape.

        Raises:
            InferenceError: a missing, extra or misshapen input.
        """
        if len(arrays) == 1 and isinstance(arrays[0], Mapping):
            named = {**arrays[0], **named}
            arrays = ()
        if arrays and named:
            raise InferenceError("infer: expected inputs either positionally or by name, received both; "
                                 "hint: pass infer(x) or infer({'X': x})")
        names = [s.name for s in self.inputs]
        if named:
            unknown = sorted(set(named) - set(names))
            missing = [n for n in names if n not in named]
            if unknown or missing:
                raise InferenceError(f"infer: expected inputs named {names}, received {sorted(named)}; hint: the "
                                     f"names are compiled.inputs[i].name")
            arrays = tuple(named[n] for n in names)
        if len(arrays) != len(self.inputs):
            raise InferenceError(f"infer: expected {len(self.inputs)} input(s) ({', '.join(names)}), received "
                                 f"{len(arrays)}; hint: one array per input, in compiled.inputs order")
        values = []
        for spec, array in zip(self.inputs, arrays, strict=True):
            value = np.asarray(array, dtype=spec.dtype)
            if value.shape != spec.shape:
                raise InferenceError(f"infer: input {spec.name} expected shape {spec.shape} (axes "
                                     f"{[a.name for a in spec.axes]}), received {value.shape}; hint: the batch axis "
                                     f"has the compiled batch size {self.batch_size}; predict(x) takes any count")
            values.append(value)
        return values

    def predict(self, x: Any) -> np.ndarray | list[np.ndarray]:
        """Outputs for any number of samples of a one-input model, batch first (like neon's ``predict``).

        Args:
            x: ``(ndata, features...)``; each row is reshaped to the input's non-batch axes.

        Returns:
            ``(ndata, outputs...)`` (a list of those for several outputs).

        Raises:
            InferenceError: a model with several inputs, or rows of the wrong size.

        Example:
            >>> compiled.predict(X_test).argmax(axis=1)
        """
        outs = self.run_batches(rows_to_input(x, self._single_input("predict"), "predict"))
        moved = [np.moveaxis(o, s.batch_index, 0) if s.batch_index is not None else o
                 for o, s in zip(outs, self.outputs, strict=True)]
        return moved[0] if len(moved) == 1 else moved

    def run_batches(self, x: np.ndarray) -> list[np.ndarray]:
        """Outputs for an input array in the input's axes order with any batch length (padded chunks).

        Args:
            x: the one input, its batch axis of any length.

        Returns:
            one array per output, its batch axis of that length.
        """
        spec = self._single_input("run_batches")
        b = spec.batch_index
        n = x.shape[b]
        pieces: list[list[np.ndarray]] = [[] for _ in self.outputs]
        for start in range(0, n, self.batch_size):
            chunk = np.take(x, np.arange(start, min(start + self.batch_size, n)), axis=b)
            valid = chunk.shape[b]
            if valid < self.batch_size:  # pad the last chunk with zeros, drop their outputs
                pad = [(0, 0)] * chunk.ndim
                pad[b] = (0, self.batch_size - valid)
                chunk = np.pad(chunk, pad)
            for out, spec_out, piece in zip(self.infer(chunk), self.outputs, pieces, strict=True):
                ob = spec_out.batch_index
                piece.append(out if ob is None else np.take(out, np.arange(valid), axis=ob))
        return [np.concatenate(p, axis=s.batch_index or 0) for p, s in zip(pieces, self.outputs, strict=True)]

    def _single_input(self, who: str) -> TensorSpec:
        if len(self.inputs) != 1 or self.inputs[0].batch_index is None:
            raise InferenceError(f"{who}: expected a model with one batched input, this one has "
                                 f"{[s.name for s in self.inputs]}; hint: call infer() with one array per input")
        return self.inputs[0]

    def evaluate(self, dataset: Iterable[Any]) -> float:
        """Top-1 accuracy of the first output over a labelled dataset.

        Args:
            dataset: an iterable of ``(x, y)`` batches in the input's axes order (a neon
                ``ArrayIterator``): ``y`` one-hot ``[classes, N]`` or integer labels ``[N]``.

        Returns:
            the fraction of samples whose argmax matches the label.

        Raises:
            InferenceError: a batch without labels.

        Example:
            >>> compiled.evaluate(test_set)
            0.968
        """
        correct, seen = 0, 0
        for item in dataset:
            x, y = split_item(item, "evaluate")
            if y is None:
                raise InferenceError("evaluate: expected (x, y) batches with labels, received x only; hint: "
                                     "ArrayIterator(X, y, nclass=...)")
            (out, *_) = self.run_batches(np.asarray(x))
            predicted = _class_of(out, self.outputs[0].batch_index)
            labels = _labels_of(np.asarray(y), predicted.shape[0])
            correct += int(np.sum(predicted == labels))
            seen += labels.shape[0]
        return correct / max(seen, 1)

    def memory_report(self) -> MemoryReport:
        """Arena bytes (planned for inference only), bytes without reuse, and workspace of the default executor.

        Example:
            >>> print(compiled.memory_report())
        """
        with self._lock:
            if self._executor is None:
                self._executor = self.new_executor()
            return self._executor.memory_report()

    @property
    def weight_bytes(self) -> int:
        """Bytes the stored weights take (quantized dtype plus scales)."""
        return sum(w.nbytes for w in self.weights.values())

    def save(self, path: Any) -> None:
        """Write the model to one deployable file (``deploy.save``).

        Example:
            >>> compiled.save("model.ngi")
        """
        from .deploy import save  # deploy.load builds a CompiledModel: deploy sits above this module

        save(self, path)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}{list(s.shape)}" for s in self.inputs)
        return (f"<CompiledModel {self.precision} batch={self.batch_size} inputs=({ins}) "
                f"weights={self.weight_bytes} B>")


# -- data helpers ------------------------------------------------------------------------------------
def rows_to_input(x: Any, spec: TensorSpec, who: str) -> np.ndarray:
    """Samples given batch first, ``(ndata, features...)``, as one array in the input's axes order."""
    x = np.asarray(x)
    sample = tuple(length for i, length in enumerate(spec.shape) if i != spec.batch_index)
    if x.ndim < 1 or int(np.prod(x.shape[1:])) != int(np.prod(sample)):
        raise InferenceError(f"{who}: expected rows of {int(np.prod(sample))} values (input {spec.name}, "
                             f"sample shape {sample}), received an array of shape {x.shape}")
    return np.moveaxis(x.reshape((x.shape[0], *sample)), 0, spec.batch_index or 0)


def split_item(item: Any, who: str) -> tuple[Any, Any]:
    """``(x, y)`` of a dataset item: an array (no labels), a dict of inputs, or an ``(x, y)`` pair."""
    if isinstance(item, np.ndarray) or isinstance(item, Mapping):
        return item, None
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return item[0], item[1]
    raise InferenceError(f"{who}: expected each batch to be an array or an (x, y) pair, received "
                         f"{type(item).__name__}; hint: iterate a neon ArrayIterator or a list of arrays")


def _class_of(out: np.ndarray, batch_index: int | None) -> np.ndarray:
    rows = np.moveaxis(out, batch_index or 0, 0)
    return rows.reshape(rows.shape[0], -1).argmax(axis=1)


def _labels_of(y: np.ndarray, n: int) -> np.ndarray:
    """Integer labels from one-hot ``[classes, N]`` or integers ``[N]`` / ``[1, N]``."""
    if y.ndim >= 2 and y.shape[0] > 1:
        return y.reshape(y.shape[0], -1).argmax(axis=0)[:n]
    return y.reshape(-1).astype(np.int64)[:n]


# -- compiling -----------------------------------------------------------------------------------------
