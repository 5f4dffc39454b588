"""The ONNX backend node tests, run case by case with the official runner's comparison.

The ``onnx`` wheel (pinned 1.22.0) ships its node conformance cases on disk
(``onnx/backend/test/data/node/<case>/model.onnx`` + ``test_data_set_*/{input,output}_*.pb``).
``run_case`` runs one with any ``onnx.backend``-style backend and classifies it the way
``onnx.backend.test.BackendTest`` would: ``pass`` (outputs match: same dtype, same shape,
``assert_allclose`` with rtol 1e-3 / atol 1e-7), ``fail`` (an output differs) or ``error``
(the backend raised: unsupported operator, ...). ``onnx.backend.test.BackendTest(backend)``
runs the same cases through unittest (``tests/ngraph_core/frontends/onnx/test_backend_suite.py``).

Command line (one line per case, then the counts):
    python -m ngraph_core.frontends.onnx.conformance 'test_add*' 'test_relu'   [--backend onnxruntime]
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import os
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

RTOL, ATOL = 1e-3, 1e-7


def node_cases_dir() -> str:
    """The folder of the installed onnx wheel's node test cases."""
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def case_names(patterns: Sequence[str] = ("*",)) -> list[str]:
    """The node test cases matching any of the shell-style ``patterns``, sorted."""
    root = node_cases_dir()
    names = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def _read(path: str, type_proto: Any = None) -> Any:
    """One ``.pb`` of a data set, parsed as the model declares the value (tensor, sequence or optional),
    as the official runner does."""
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        data = f.read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if kind == "optional_type":
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def _numbered(data_dir: str, prefix: str) -> list[str]:
    return sorted(glob.glob(os.path.join(data_dir, f"{prefix}_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))


def data_sets(case_dir: str, model: Any = None) -> Iterator[tuple[list[Any], list[Any]]]:
    """Each ``test_data_set_*`` of a case as (inputs, expected outputs); ``model`` (the case's
    ``ModelProto``) says how each value is stored."""
    inputs_types: list[Any] = []
    outputs_types: list[Any] = []
    if model is not None:
        initializers = {t.name for t in model.graph.initializer}
        inputs_types = [v.type for v in model.graph.input if v.name not in initializers]
        outputs_types = [v.type for v in model.graph.output]
    for data_dir in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        ins, outs = _numbered(data_dir, "input"), _numbered(data_dir, "output")
        yield ([_read(p, inputs_types[i] if i < len(inputs_types) else None) for i, p in enumerate(ins)],
               [_read(p, outputs_types[i] if i < len(outputs_types) else None) for i, p in enumerate(outs)])


def compare(expected: Sequence[Any], got: Sequence[Any]) -> str | None:
    """None when ``got`` matches ``expected`` as the official runner checks, else what differs."""
    if len(expected) != len(got):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        if isinstance(e, list):
            if not isinstance(g, (list, tuple)) or len(e) != len(g):
                return f"output {i}: expected a sequence of {len(e)}"
            problem = compare(e, list(g))
            if problem:
                return f"output {i}: {problem}"
            continue
        g = np.asarray(g)
        if g.dtype != e.dtype:
            return f"output {i}: dtype {g.dtype}, expected {e.dtype}"
        if g.shape != e.shape:
            return f"output {i}: shape {g.shape}, expected {e.shape}"
        try:
            if e.dtype == object:
                np.testing.assert_array_equal(g, e)
            else:
                np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)
        except AssertionError as exc:
            return f"output {i}: values differ ({str(exc).strip().splitlines()[-1][:120]})"
    return None


def run_case(name: str, backend: Any) -> tuple[str, str]:
    """Run node case ``name`` with ``backend``: ``("pass" | "fail" | "error", detail)``."""
    import onnx

    case_dir = os.path.join(node_cases_dir(), name)
    try:
        model = onnx.load(os.path.join(case_dir, "model.onnx"))
        rep = backend.prepare(model, "CPU")
        for inputs, expected in data_sets(case_dir, model):
            problem = compare(expected, list(rep.run(inputs)))
            if problem:
                return "fail", problem
    except Exception as exc:  # the classification itself: any error counts as an error, as unittest does
        return "error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return "pass", ""


def get_backend(name: str) -> Any:
    """``"ngraph"`` (ours) or ``"onnxruntime"`` (its ``onnxruntime.backend``)."""
    if name == "onnxruntime":
        import onnxruntime.backend as ort_backend

        return ort_backend
    from . import backend

    return backend


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ngraph_core.frontends.onnx.conformance",
                                     description="Run ONNX backend node test cases and count pass/fail/error.")
    parser.add_argument("patterns", nargs="*", default=["*"], help="case name patterns (shell-style)")
    parser.add_argument("--backend", default="ngraph", choices=["ngraph", "onnxruntime"])
    parser.add_argument("--quiet", action="store_true", help="print only failures and the counts")
    args = parser.parse_args(argv)
    backend = get_backend(args.backend)
    counts: Counter[str] = Counter()
    for name in case_names(args.patterns):
        status, detail = run_case(name, backend)
        counts[status] += 1
        if not args.quiet or status != "pass":
            print(f"{status:5s} {name} {detail}")
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors "
          f"({sum(counts.values())} cases, backend {args.backend})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
