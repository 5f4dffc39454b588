"""The official ONNX backend node tests, unchanged, on the curated cases that must pass.

``onnx.backend.test.BackendTest`` (the runner every ONNX backend uses) builds one unittest
case per node test shipped in the onnx wheel; we include the cases listed in the
``curated_*.txt`` files beside this file (one case name per line, ``#`` comments), which
grow as converters land. ``python -m ngraph_core.frontends.onnx.conformance`` and
``benchmarks/onnx_suite.py`` run the whole suite and count.
"""

from __future__ import annotations

import glob
import os
import re

import pytest

pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402

from ngraph_core.frontends.onnx import backend  # noqa: E402
from ngraph_core.frontends.onnx.conformance import case_names  # noqa: E402

HERE = os.path.dirname(__file__)


def curated_cases() -> list[str]:
    """Every case name listed in the curated_*.txt files, once, sorted."""
    names: set[str] = set()
    for path in glob.glob(os.path.join(HERE, "curated_*.txt")):
        with open(path, encoding="utf-8") as f:
            names.update(line.split("#")[0].strip() for line in f)
    names.discard("")
    return sorted(names)


CURATED = curated_cases()


def test_curated_cases_exist_in_the_installed_onnx():
    unknown = sorted(set(CURATED) - set(case_names()))
    assert CURATED and not unknown, f"curated names that are not node cases of this onnx: {unknown}"


def test_the_backend_satisfies_the_onnx_backend_interface():
    import numpy as np
    from onnx import TensorProto, helper
    from onnx.backend.base import Backend, BackendRep

    from ngraph_core.frontends.onnx import NgraphBackend, OnnxError

    assert issubclass(NgraphBackend, Backend)
    for name in ("prepare", "run_model", "run_node", "supports_device"):  # the module is the entry point too
        assert getattr(backend, name) == getattr(NgraphBackend, name)
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    x, y = np.array([[1.0, -2.0, 3.0]], np.float32), np.array([0.5, 0.5, 0.5], np.float32)
    node = helper.make_node("Sub", ["x", "y"], ["z"])
    (z,) = backend.run_node(node, [x, y])
    np.testing.assert_array_equal(z, [[0.5, -2.5, 2.5]])
    graph = helper.make_graph([node], "sub", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
                                              helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = backend.prepare(model, "CPU")
    assert isinstance(rep, BackendRep) and NgraphBackend.is_compatible(model)
    np.testing.assert_array_equal(rep.run([x, y])[0], x - y)
    np.testing.assert_array_equal(rep.run({"x": np.ones((4, 3), np.float32), "y": y})[0], np.full((4, 3), 0.5))
    np.testing.assert_array_equal(backend.run_model(model, [x, y])[0], x - y)
    with pytest.raises(OnnxError, match="expected device 'CPU', received 'CUDA'"):
        backend.prepare(model, "CUDA")


_suite = onnx.backend.test.BackendTest(backend, __name__)
for _name in CURATED:
    _suite.include(f"^{re.escape(_name)}_cpu$")
_cases = _suite.test_cases  # a property that builds new classes on each access: read it once
for _case in _cases.values():  # keep only the included tests (the runner skips the rest)
    for _attr in [a for a in vars(_case) if a.startswith("test_")]:
        if getattr(getattr(_case, _attr), "__unittest_skip__", False):
            delattr(_case, _attr)
globals().update({name: case for name, case in _cases.items() if any(a.startswith("test_") for a in vars(case))})


def test_the_counting_runner_reads_sequence_and_optional_data_as_declared():
    """``conformance.run_case`` parses each data file as the model declares the value (as the official
    runner does): onnxruntime passes a sequence case and an optional case, and ours refuses them clearly."""
    ort_backend = pytest.importorskip("onnxruntime.backend")
    from ngraph_core.frontends.onnx.conformance import run_case

    for case in ("test_sequence_insert_at_back", "test_optional_has_element_optional_input"):
        assert run_case(case, ort_backend) == ("pass", "")
        status, detail = run_case(case, backend)
        assert status == "error" and "OnnxError" in detail and ("sequence" in detail or "optional" in detail), detail
