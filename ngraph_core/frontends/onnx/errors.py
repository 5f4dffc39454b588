"""The ONNX frontend's errors: a file that is not a model, a model we cannot express, an op we lack.

``UnsupportedOpError`` (from ``ngraph_core.errors``) is raised for an operator with no
converter at the model's opset; the subclass here carries the operator, the opset and
the node so callers (the backend test runner, ``ngraph convert``) can report them.
"""

from __future__ import annotations

from ...errors import IndexRangeError, MemoryBudgetError, NgraphError, UnsupportedOpError


class OnnxError(NgraphError, ValueError):
    """An ONNX model that is malformed, truncated, or uses a feature the importer does not express."""


class OnnxLoadError(OnnxError):
    """The bytes or file given are not a readable ONNX model (corrupt, truncated, empty, not protobuf)."""


class OnnxBudgetError(OnnxError, MemoryBudgetError):
    """A model whose values, or whose constants computed at import time, would take more bytes than the
    import's budget (``import_model(..., max_bytes=...)``; ``ngraph_core/memory_budget.py``)."""


class OnnxIndexError(OnnxError, IndexRangeError):
    """An index known at import time (a ``Gather``'s static indices) lies outside the axis it indexes."""


class UnsupportedOnnxOpError(UnsupportedOpError):
    """No converter for an ONNX operator at the model's opset.

    Attributes:
        op_type: the operator (``"Resize"``); ``domain`` its domain (``""`` for the default).
        opset: the model's opset version for that domain.
        node: the node's name (or ``"<op_type> #index"`` when unnamed).
    """

    def __init__(self, op_type: str, opset: int, node: str, domain: str = "", detail: str = "") -> None:
        self.op_type, self.opset, self.node, self.domain = op_type, opset, node, domain
        where = f"{domain}::{op_type}" if domain else op_type
        super().__init__(
            f"ONNX operator {where} (opset {opset}) at node {node!r} is not supported"
            + (f": {detail}" if detail else "")
            + "; hint: see ngraph_core/frontends/onnx/ops_*.py for the operators we convert, or export the "
              "model at another opset"
        )
