"""One-node ONNX models run by ngraph and by onnxruntime, compared (the converter tests' shared helper).

``check_node`` builds a model holding one node with ``onnx.helper``, runs it through our
``import_model`` and through onnxruntime (or compares with a NumPy ``expected`` where
onnxruntime has no kernel for a type), and asserts equal dtypes, shapes and values.

Example:
    >>> check_node("ReduceSum", {"x": x}, opset=11, axes=[1], keepdims=0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ngraph_core.frontends.onnx import import_model


def make_model(op_type: str, inputs: Mapping[str, np.ndarray], opset: int, n_outputs: int = 1,
               static: Mapping[str, np.ndarray] | None = None, **attrs: Any) -> onnx.ModelProto:
    """A model of one ``op_type`` node reading ``inputs`` (graph inputs) then ``static`` (initializers).

    An input whose name starts with ``"_"`` is an omitted optional input (an empty name).
    """
    static = dict(static or {})
    names = [("" if name.startswith("_") else name) for name in list(inputs) + list(static)]
    outputs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outputs, **attrs)
    graph_inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                    for name, v in inputs.items() if not name.startswith("_")]
    initializers = [onnx.numpy_helper.from_array(np.asarray(v), name) for name, v in static.items()]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    graph = helper.make_graph([node], f"{op_type.lower()}_test", graph_inputs, graph_outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)  # gives the outputs their types
    return model


def run_ngraph(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Our outputs for the model's graph inputs."""
    fed = {k: v for k, v in inputs.items() if not k.startswith("_")}
    return import_model(model, initializers="constants").run(fed)


def run_ort(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs for the model's graph inputs."""
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v for k, v in inputs.items() if not k.startswith("_")})


def assert_same(got: Sequence[np.ndarray], expected: Sequence[np.ndarray], rtol: float = 1e-5,
                atol: float = 1e-6) -> None:
    """Equal counts, dtypes, shapes, and values within tolerance (NaNs in the same places)."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype, f"dtype {g.dtype}, expected {e.dtype}"
        assert g.shape == e.shape, f"shape {g.shape}, expected {e.shape}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)


def check_node(op_type: str, inputs: Mapping[str, np.ndarray], opset: int = 13, expected: Any = None,
               static: Mapping[str, np.ndarray] | None = None, n_outputs: int = 1, rtol: float = 1e-5,
               atol: float = 1e-6, **attrs: Any) -> list[np.ndarray]:
    """Run one node through ngraph and compare with onnxruntime (or ``expected``); return our outputs."""
    model = make_model(op_type, inputs, opset, n_outputs, static, **attrs)
    onnx.checker.check_model(model)
    got = run_ngraph(model, inputs)
    if expected is None:
        expected = run_ort(model, inputs)
    elif not isinstance(expected, (list, tuple)):
        expected = [expected]
    assert_same(got, expected, rtol, atol)
    return got
