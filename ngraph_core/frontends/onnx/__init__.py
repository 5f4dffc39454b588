"""ONNX frontend: import ONNX models into ngraph graphs, run the ONNX backend tests, export back.

Example:
    >>> from ngraph_core.frontends import onnx as ngx
    >>> model = ngx.import_model("model.onnx", dims={"N": 8})
    >>> (y,) = model.run({"x": x})
    >>> rep = ngx.backend.prepare(onnx_model); rep.run([x])   # onnx.backend API
"""

from . import (  # noqa: F401, E501 - importing registers the converters
    ops_activations,
    ops_attention,
    ops_axis,
    ops_control,
    ops_conv,
    ops_deform_conv,
    ops_einsum,
    ops_index,
    ops_logic,
    ops_loss,
    ops_math,
    ops_nn,
    ops_norm,
    ops_pad,
    ops_pool,
    ops_quant,
    ops_reduce,
    ops_resize,
    ops_rnn,
    ops_sample,
    ops_shape,
    ops_signal,
)
from .backend import NgraphBackend, NgraphBackendRep
from .errors import OnnxBudgetError, OnnxError, OnnxIndexError, OnnxLoadError, UnsupportedOnnxOpError
from .export import ExportError, ExportWarning, export
from .importer import ImportedModel, build_model, import_model, load_model
from .registry import converter, supported_ops

__all__ = [
    "import_model", "build_model", "load_model", "ImportedModel", "NgraphBackend", "NgraphBackendRep",
    "OnnxError", "OnnxLoadError", "OnnxBudgetError", "OnnxIndexError",
    "UnsupportedOnnxOpError", "converter", "supported_ops", "backend",
    "export", "ExportError", "ExportWarning",
]

from . import backend  # noqa: E402 - the module itself is the onnx.backend-style entry point
